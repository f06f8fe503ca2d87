"""Which human labels the metric lab's pairwise accuracy scores against (issue 47).

Imported pairs (``PairJudgment``: Pascal-50S) carry the label of the file they came from
(``choice``: pascal_50s.json's majority vote, Vedantam et al. 2015). A published judge's
pair files imported beside them (``import_metric_scores`` with FLEUR's) carry their own
labels of the same pairs, kept in ``PairJudgment.labels`` under the column's name. The two
releases label 35 of the 4,000 pairs differently, enough to move FLEUR's published HM and
MM (97.6 and 74.2, against its files' labels) to 97.7 and 74.7. Neither release is wrong,
so a metrics job's ``labels`` chooses (``DATASET``, the default, or the column's name) and
the report says which (``labels``).

Only the imported pairs' labels are chosen: a mode's own comparisons (HUMANr's) are this
study's people, who have no other release.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotation.errors import Conflict
from annotation.models import PairJudgment, Study
from annotation.text import shown

#: The labels the pairs were imported with: the default, and the survey's Table 5's.
DATASET = "dataset"


def label_sources(study: Study) -> dict[str, str]:
    """The study's choices of labels, each with the words the report says it in:
    ``DATASET`` first, then every imported column whose pair files labelled pairs of the
    study. Empty for a study without imported pairs."""
    files: set[str] = set()
    columns: set[str] = set()
    for source, labels in PairJudgment.objects.filter(study=study).values_list("source", "labels"):
        files.add(source)
        columns.update(labels)
    if not files:
        return {}
    # Only the Pascal-50S importer writes pairs, so the pairs' own labels are Vedantam et
    # al.'s, whatever the file was called.
    own = f"{', '.join(sorted(f for f in files if f)) or 'the imported file'} (Vedantam et al.)"
    return {DATASET: own} | {name: f"{name}'s files" for name in sorted(columns)}


def labels_check(study: Study, labels: str) -> None:
    """Refuse labels the study's pairs do not have, naming the choices they do have: a
    ``Conflict``, since the study's state refuses them (importing the judge's pair files
    would give them), not the request."""
    sources = label_sources(study)
    if labels == DATASET or labels in sources:
        return
    offered = "; ".join(f"{key} ({words})" for key, words in sources.items())
    raise Conflict(
        f"This study's pairs have no labels from {shown(labels)}; choose "
        + (offered or f"{DATASET} (the study has no imported pairs)")
        + ".",
        field="labels",
    )


def labels_used(study: Study, labels: str) -> dict[str, Any] | None:
    """What the report says of its labels: the choice and its words (None: no imported
    pairs, so no labels were chosen)."""
    sources = label_sources(study)
    return {"choice": labels, "description": sources[labels]} if labels in sources else None


def labelled_pairs(study: Study, labels: str = DATASET) -> dict[str, list[tuple[int, int, int]]]:
    """The imported pairs by category, ``[(caption a, caption b, label 0|1)]``, with the
    chosen labels. A pair the chosen column's files did not label is left out (the group's
    count of pairs shows it)."""
    groups: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for category, a, b, choice, others in PairJudgment.objects.filter(study=study).values_list(
        "category", "caption_a_id", "caption_b_id", "choice", "labels"
    ):
        label = choice if labels == DATASET else others.get(labels)
        if label is not None:
            groups[category or "pairs"].append((a, b, label))
    return dict(groups)
