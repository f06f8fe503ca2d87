"""What every page test checks of a page's layout: no sideways scroll at a phone's and a
laptop's width, and, when ``CAPEVAL_SCREENSHOTS`` names a folder, a full-page screenshot at
each width (``<name>-390.png``, ``<name>-1280.png``) for a person to look at.

One helper for every e2e module (they each had their own copy before issue 46).
"""

import os
import re
from pathlib import Path

WIDTHS = (390, 1280)
HEIGHT = 844


def assert_fits_every_width(page, context: str, shot: str | None = None) -> None:
    """Fail when the page scrolls sideways at any of ``WIDTHS``; the viewport is left at the
    last width. ``shot`` names the screenshots taken when ``CAPEVAL_SCREENSHOTS`` is set."""
    folder = os.environ.get("CAPEVAL_SCREENSHOTS")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": HEIGHT})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{context} scrolls sideways by {overflow} px at {width} px"
        if folder and shot:
            name = re.sub(r"[^a-z0-9-]+", "-", shot.lower()).strip("-")
            Path(folder).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(folder) / f"{name}-{width}.png"), full_page=True)
