"""The "reliability" section of every mode's report: a worker-competence model per study.

Each mode's report collects its categorical answers as ``(participant id, task, label)``
rows and calls :func:`reliability_section`, which fits ``rubrics.reliability.dawid_skene``
and shapes the result as the JSON the report page (``templates/reports/_reliability.html``)
and the study's worker table read::

    {"method": "Dawid-Skene (crowd-kit)", "note": "<what was estimated from what>",
     "estimable": bool,
     "workers": [{"participant": "<pseudonym>", "labels": int, "competence": float | None,
                  "flagged": bool, "reason": "<why flagged, empty if not>"}]}

The report job writes nothing: a flag lives in the stored report, never on the participant.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from rubrics import reliability

METHOD = "Dawid-Skene (crowd-kit)"


def reliability_section(
    rows: Iterable[tuple[int, Hashable, Hashable]],
    *,
    pseudonyms: Mapping[int, str],
    note: str,
) -> dict[str, Any]:
    """Fit the model to ``rows`` and shape the report's section.

    ``note`` is one sentence saying what is estimated from what; the reason when the model
    cannot be fitted (else the thresholds of estimate and flag, and a stop at the iteration
    cap) is added to it. ``labels`` counts a worker's answers on tasks another worker also
    answered: the only ones the estimate rests on. Flagged workers come first, then by
    competence, lowest first; workers without an estimate last.
    """
    result = reliability.dawid_skene(rows)
    text = note.rstrip(".")
    if not result.estimable:
        text += f"; not estimable: {result.reason}"
    else:
        text += (
            f"; workers with fewer than {reliability.MIN_LABELS} shared answers are not "
            "estimated, and a worker is flagged when their chance-corrected agreement with "
            f"the others' estimated truth is below {reliability.SPAMMER_KAPPA:g}"
        )
    if result.estimable and not result.converged:
        text += (
            f"; the fit stopped at the cap of {result.iterations} iterations without "
            "converging, so treat the numbers as approximate"
        )
    entries = [
        {
            "participant": pseudonyms.get(w.worker, str(w.worker)),
            "labels": w.labels,
            "competence": w.competence,
            "flagged": w.flagged,
            "reason": w.reason,
        }
        for w in result.workers
    ]
    entries.sort(
        key=lambda w: (
            not w["flagged"],
            w["competence"] is None,
            w["competence"] or 0.0,
            w["participant"],
        )
    )
    return {
        "method": METHOD,
        "note": text + ".",
        "estimable": result.estimable,
        "workers": entries,
    }
