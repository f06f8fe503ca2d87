"""Reading a page as a screen reader does, in Playwright: its accessibility tree (aria
snapshots: landmarks, the heading outline), the keyboard (Tab until a control has the
focus), what its live regions announce, and the checks every page of a screen-reader-first
mode passes (axe's WCAG 2.2 AA rules of any impact, no sideways scroll at either width).

No CSS selector, coordinate or screenshot: controls are found by role and name. Script in
the page only asks whether an element has the focus, listens to the status regions found
by role, and runs axe and the layout's scroll width (issue 43).
"""

from __future__ import annotations

import re

from tests.e2e.axe import axe_wcag22_violations, describe
from tests.e2e.layout import HEIGHT, WIDTHS, assert_fits_every_width


def snapshot(page) -> str:
    """The page as a screen reader's tree: roles, names, levels, states, text."""
    return page.locator("body").aria_snapshot()


def outline(tree: str) -> list[tuple[int, str]]:
    """The headings of an aria snapshot in reading order: (level, name)."""
    found = re.findall(r'heading "((?:[^"\\]|\\.)*)" \[level=(\d)\]', tree)
    return [(int(level), name) for name, level in found]


def landmarks(tree: str) -> list[str]:
    """The page's top-level landmarks in order."""
    return re.findall(r"^- (banner|main|contentinfo|navigation|complementary)\b", tree, re.M)


def focused(locator) -> bool:
    return locator.evaluate("element => element === document.activeElement")


def tab_to(page, target, *, back: bool = False, limit: int = 80) -> None:
    """Press Tab (Shift+Tab with ``back``) until ``target`` has the focus."""
    key = "Shift+Tab" if back else "Tab"
    for _ in range(limit):
        if focused(target):
            return
        page.keyboard.press(key)
    raise AssertionError(f"{key} never reached {target}")


def press_and_wait(page) -> None:
    """Enter on the focused control, and wait for the page it leads to."""
    with page.expect_navigation():
        page.keyboard.press("Enter")


def check(page, what: str, width: int) -> None:
    """No WCAG 2.2 AA finding of any impact and no sideways scroll, at both widths."""
    for size in WIDTHS:
        page.set_viewport_size({"width": size, "height": HEIGHT})
        found = axe_wcag22_violations(page)
        assert found == [], f"{what} at {size} px:\n" + "\n".join(map(describe, found))
    assert_fits_every_width(page, what)
    page.set_viewport_size({"width": width, "height": HEIGHT})


#: Keeps every text the page's status regions take, in this tab's session storage, so a
#: state the next page replaces at once ("Saved.", then the next item) is still heard.
LISTEN = """regions => regions.forEach(region => new MutationObserver(() => {
  const said = JSON.parse(sessionStorage.getItem("heard") || "[]");
  const text = region.textContent.trim();
  if (text && said[said.length - 1] !== text) said.push(text);
  sessionStorage.setItem("heard", JSON.stringify(said));
}).observe(region, {childList: true, subtree: true, characterData: true}))"""


def listen(page) -> None:
    """From now on, keep what the page's status (polite live) regions announce: only
    those in the accessibility tree now, as a screen reader has them."""
    page.evaluate('() => sessionStorage.removeItem("heard")')
    page.get_by_role("status").evaluate_all(LISTEN)


def heard(page) -> list[str]:
    """What the status regions said since ``listen``, in order, across page loads."""
    return page.evaluate('() => JSON.parse(sessionStorage.getItem("heard") || "[]")')
