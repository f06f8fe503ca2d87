"""The report's part of the mode contract: a mode's report, computed by a job from the
judgments and stored, then rendered; and whether the platform refreshes it unasked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from annotation.models import Study

#: A job's progress callback: ``progress(percent, message)``.
Progress = Callable[[int, str], None]


class Report:
    """A mode's report: computed by a job from the judgments, stored, then rendered.

    Child classes set ``template`` and implement ``run``; figures are optional.
    """

    template: ClassVar[str] = ""
    figure_names: ClassVar[tuple[str, ...]] = ()
    #: Keys of the stored report that summarise agreement in an export's datasheet (never
    #: the whole report: HUMANr's holds the completion code). Default: none.
    summary_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self, mode: Any):  # the Mode (base.py imports this module)
        self.mode = mode

    def run(self, study: Study, progress: Progress) -> dict[str, Any]:
        """Aggregate the study's judgments into the JSON the page renders."""
        raise NotImplementedError

    def refresh_due(self, study: Study) -> bool:
        """Whether the platform should refresh this live study's report unasked now: its
        serving reads the latest finished report and enough answers came since. Asked each
        minute by the beat's ``services.reports.reports_refresh``, never while a report of
        the study is queued or running; a few queries at most, never a whole stored report.
        Default: never (a report is the researcher's to ask for)."""
        return False

    def summary(self, result: dict[str, Any]) -> dict[str, Any]:
        """What an export's datasheet says of the latest report ``result``: the values of
        ``summary_keys`` it holds. Override to trim a value."""
        return {key: result[key] for key in self.summary_keys if result.get(key) is not None}

    def human_scores(self, study: Study) -> tuple[dict[str, list[tuple[int, float]]], str]:
        """The caption-level human scores the metric lab correlates metrics with.

        ``({score name: [(caption id, value), ...]}, coefficient)``, the coefficient the
        field reports for them (``"pearson"``, ``"kendall_tau_b"``, ``"kendall_tau_c"``).
        Default: none (``{}, ""``), for a mode whose judgments are not caption scores.
        """
        return {}, ""

    def human_pairs(self, study: Study) -> dict[str, list[tuple[int, int, int]]]:
        """Pairwise human judgments the metric lab scores metrics' accuracy on, by group:
        ``{group: [(caption a, caption b, choice 0 (a) | 1 (b)), ...]}``. Default: none."""
        return {}

    def context(self, result: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
        """Extra context for the report page (e.g. a re-weighted total from query values)."""
        return {}

    def figure(self, name: str, result: dict[str, Any]):
        """Draw one of ``figure_names`` from a stored report as a matplotlib Figure."""
        raise KeyError(name)
