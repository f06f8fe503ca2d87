"""The live dashboard's part of the mode contract: the mode's own panel and its words.

The dashboard (``annotation/dashboard.py``, ``templates/studies/_dashboard.html``) shows
what every study has: progress per item kind, rates, leases, crowd integrity and the
per-worker table. What only one protocol has (VICR's adaptive stopping, HUMANr's
adaptive allocation) is the mode's panel: ``mode.dashboard.panel(study)`` gives a template
and the context it computes, and the dashboard includes it without knowing what it says.
The words the shared parts need of a mode (what one answer finishes, whether catch trials
are served, why no worker is checked) are attributes here with plain defaults, and
``worker_agreement`` reads a worker's agreement from the mode's own report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from annotation.models import Study


@dataclass(frozen=True)
class Panel:
    """A mode's section of the dashboard: ``template`` (a template name, included in the
    dashboard's context with ``panel`` set to ``context``) and what it shows."""

    template: str
    context: dict[str, Any] = field(default_factory=dict)


class Dashboard:
    """What a mode adds to the live dashboard. The default adds no panel.

    A child class sets ``panel_template`` and implements ``panel_context``; the words have
    defaults a mode overrides where they would be wrong for it.
    """

    #: The template of the mode's panel ("": none), e.g. ``modes/vicr/_dashboard_panel.html``.
    panel_template: ClassVar[str] = ""
    #: What one item is, finished by one answer (the progress table's note), in the singular.
    item_words: ClassVar[str] = "item"
    #: Whether the mode serves the catch trials of ``modes/catch.py``: the per-worker table
    #: shows their column only then (the arena's gold battles are its worker check).
    catch_trials: ClassVar[bool] = False
    #: What the per-worker table says when the mode has no ``worker_checks``.
    no_checks_note: ClassVar[str] = "This mode has no check of the participants."

    def __init__(self, mode: Any):  # the Mode (base.py imports this module)
        self.mode = mode

    def panel_context(self, study: Study) -> dict[str, Any] | None:
        """What the panel shows of ``study``; None: nothing to show now (e.g. the setting
        it reports on is off). Called on every poll of the dashboard: a few queries at most,
        whatever the study's size."""
        return None

    def worker_agreement(self, result: dict[str, Any]) -> dict[str, float]:
        """Each worker's agreement in the latest stored report ``result``, by pseudonym: a
        share (0 to 1) the per-worker table shows as "exact". Default: none."""
        return {}

    def panel(self, study: Study) -> Panel | None:
        """The panel the dashboard includes for ``study``, or None."""
        if not self.panel_template:
            return None
        context = self.panel_context(study)
        return None if context is None else Panel(self.panel_template, context)
