"""The error-span report: per-system ESA scores with intervals, MQM-weighted errors per
caption and per 100 words, error counts by category and severity, span and score
agreement between annotators of the same caption, and the adjudication view.

Every statistic is ``rubrics.spans`` / ``rubrics.spans_agreement`` (pure, documented in
``docs/protocol-choices.md``, "Error spans"); this module reads the judgments and shapes
the JSON. A statistic that cannot be computed leaves its section empty with the reason,
never a NaN.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

# matplotlib (about 30 MB) is imported where a figure is drawn, not here: the export path
# imports this module through the mode registry and must stay inside its memory budget
# (issue 27; tests/annotation/test_exports.py checks it).
from annotation.models import Caption, Judgment, Participant, Study
from annotation.modes.base import Report
from annotation.modes.spans.compare import comparison, suggestion_agreement
from annotation.modes.spans.protocol import CAPTION, weighted_errors
from rubrics import spans as rules
from rubrics import spans_agreement

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Captions the adjudication view shows (those with the most annotators first): the view
#: is for reading, and a stored report must stay small.
ADJUDICATION_CAPTIONS = 30
#: How the page names each order of the system table (``SpansSettings.ranking``).
RANKING_WORDS = {
    "esa": "the ESA score, highest first",
    "mqm": "MQM per caption, fewest weighted errors first",
}


def judgment_rows(study: Study) -> list[dict[str, Any]]:
    """The study's kept error-span judgments with their caption's text and system."""
    # Two keys of the spec, not the spec: an imported item's spec also holds its source text.
    rows = list(
        Judgment.objects.filter(study=study, item__kind=CAPTION, excluded=False)
        .order_by("id")
        .values_list("participant_id", "item__spec__caption", "item__spec__system", "payload")
    )
    # The study's captions, not "pk in (the 7,000 ids judged)": psycopg takes a second to
    # bind that many parameters, and a study's captions are the ones its items point at.
    texts = dict(Caption.objects.filter(study=study).values_list("pk", "text"))
    return [
        {
            "participant": participant,
            "caption": caption,
            "system": system or "",
            "text": texts.get(caption, ""),
            "payload": payload,
        }
        for participant, caption, system, payload in rows
    ]


def highlighted(text: str, marks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The text cut into pieces, each with the severity of the mark over it ("" if none);
    where marks overlap the major one wins (as ``spans_agreement`` codes characters)."""
    codes = [""] * len(text)
    for mark in marks:
        if mark.get("omission") or mark.get("start") is None:
            continue
        for i in range(mark["start"], min(mark["end"], len(text))):
            if codes[i] != "major":
                codes[i] = mark["severity"]
    pieces: list[dict[str, Any]] = []
    for i, ch in enumerate(text):
        if pieces and pieces[-1]["severity"] == codes[i]:
            pieces[-1]["text"] += ch
        else:
            pieces.append({"text": ch, "severity": codes[i]})
    return pieces


def suggestion_rates(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per source of suggestions (ESA-AI): suggestions decided, accepted, rejected, and the
    acceptance rate (accepted / decided), over the kept judgments."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        for decision in r["payload"].get("suggestions", ()):
            counts[decision["source"]][decision["decision"]] += 1
    return [
        {
            "source": source,
            "decided": c["accepted"] + c["rejected"],
            "accepted": c["accepted"],
            "rejected": c["rejected"],
            "acceptance_rate": c["accepted"] / (c["accepted"] + c["rejected"]),
        }
        for source, c in sorted(counts.items())
    ]


class SpansReport(Report):
    template = "modes/spans/report.html"
    figure_names = ("errors",)
    summary_keys = ("span_agreement", "score_alpha", "compare")

    def run(self, study: Study, progress) -> dict[str, Any]:
        config = self.mode.settings(study)
        pseudonyms = dict(Participant.objects.filter(study=study).values_list("pk", "pseudonym"))
        rows = judgment_rows(study)
        progress(10, "judgments read")
        result: dict[str, Any] = {"judgments": len(rows), "systems": []}
        if not rows:
            result["error"] = "no judgment is kept yet"
            return result
        scored = [r for r in rows if r["payload"].get("score") is not None]
        esa: dict[Any, rules.ESAScore] = {}
        if scored:
            esa = rules.esa_system_scores(
                [r["system"] for r in scored],
                [r["caption"] for r in scored],
                [r["payload"]["score"] for r in scored],
                n_resamples=config.bootstrap_resamples,
                seed=study.seed,
            )
        progress(40, "ESA scores")
        weighted: dict[str, list[float]] = defaultdict(list)
        words: dict[str, int] = defaultdict(int)
        severities: dict[str, Counter[str]] = defaultdict(Counter)
        weights = config.weights()
        for r in rows:
            weighted[r["system"]].append(weighted_errors(r["payload"], config, weights))
            words[r["system"]] += len(r["text"].split())
            for mark in r["payload"]["spans"]:
                severities[r["system"]][mark["severity"]] += 1
        systems = []
        for system in sorted(weighted):
            values = weighted[system]
            score = esa.get(system)
            systems.append(
                {
                    "system": system,
                    "judgments": len(values),
                    "minor": severities[system]["minor"],
                    "major": severities[system]["major"],
                    "esa": score.mean if score else None,
                    "esa_low": score.low if score else None,
                    "esa_high": score.high if score else None,
                    "mqm_per_caption": float(np.mean(values)),
                    # Total weight over total words judged (each judgment's words once).
                    "mqm_per_100_words": 100.0 * sum(values) / words[system]
                    if words[system]
                    else None,
                }
            )
        ranking = config.ranking if config.ranking != "auto" else ("esa" if esa else "mqm")
        if ranking == "esa":
            # Unscored systems (none in an ESA study) last.
            systems.sort(key=lambda row: (row["esa"] is None, -(row["esa"] or 0), row["system"]))
        else:
            systems.sort(key=lambda row: (row["mqm_per_caption"], row["system"]))
        result["systems"] = systems
        result["ranking"] = {"by": ranking, "words": RANKING_WORDS[ranking]}
        result["counts"] = self._counts(rows)
        result["suggestions"] = suggestion_rates(rows)
        result["suggestion_agreement"] = suggestion_agreement(study, config.suggestions)
        progress(60, "errors counted")
        result.update(self._agreement(rows))
        if config.compare_study:
            result["compare"] = comparison(study, config.compare_study)
        result["adjudication"] = self._adjudication(rows, pseudonyms)
        progress(90, "agreement")
        return result

    def _counts(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        counts: Counter[tuple[str, str]] = Counter()
        for r in rows:
            for mark in r["payload"]["spans"]:
                counts[(mark["category"], mark["severity"])] += 1
        categories = sorted({c for c, _ in counts})
        return [
            {
                "category": c,
                **{sev: counts[(c, sev)] for sev in rules.SEVERITIES},
            }
            for c in categories
        ]

    def _agreement(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        by_caption: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            by_caption[r["caption"]].append(r)
        section: dict[str, Any] = {}
        texts = [
            (
                len(group[0]["text"]),
                [
                    [
                        (m["start"], m["end"], m["severity"])
                        for m in r["payload"]["spans"]
                        # Omissions have no characters; an imported empty span neither.
                        if not m.get("omission") and m["start"] < m["end"]
                    ]
                    for r in group
                ],
            )
            for group in by_caption.values()
            if len(group) >= 2
        ]
        try:
            agreement = spans_agreement.span_agreement(texts)
            section["span_agreement"] = {
                "char_f1": agreement.char_f1,
                "char_f1_severity": agreement.char_f1_severity,
                "matched": agreement.matched,
                "matched_severity": agreement.matched_severity,
                "captions": agreement.n_texts,
                "pairs": agreement.n_pairs,
            }
        except ValueError as exc:
            section["span_agreement"] = None
            section["span_agreement_error"] = str(exc)
        scored = [r for r in rows if r["payload"].get("score") is not None]
        if not scored:
            section["score_alpha"] = None
            section["score_alpha_error"] = "no judgment has a score (MQM has none)"
            return section
        try:
            section["score_alpha"] = spans_agreement.score_alpha(
                [r["caption"] for r in scored],
                [r["participant"] for r in scored],
                [r["payload"]["score"] for r in scored],
            )
        except ValueError as exc:
            section["score_alpha"] = None
            section["score_alpha_error"] = str(exc)
        return section

    def _adjudication(
        self, rows: list[dict[str, Any]], pseudonyms: dict[int, str]
    ) -> list[dict[str, Any]]:
        by_caption: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            by_caption[r["caption"]].append(r)
        chosen = sorted(by_caption, key=lambda c: (-len(by_caption[c]), c))
        return [
            {
                "caption": caption,
                "system": by_caption[caption][0]["system"],
                "annotators": [
                    {
                        "participant": pseudonyms.get(r["participant"], "?"),
                        "score": r["payload"].get("score"),
                        "unusable": r["payload"].get("unusable", False),
                        "pieces": highlighted(r["text"], r["payload"]["spans"]),
                        "marks": r["payload"]["spans"],
                    }
                    for r in by_caption[caption]
                ],
            }
            for caption in chosen[:ADJUDICATION_CAPTIONS]
        ]

    def figure(self, name: str, result: dict[str, Any]) -> Figure:
        counts = result.get("counts")
        if name not in self.figure_names or not counts:
            raise KeyError(name)
        labels = [row["category"] or "(none)" for row in counts]
        from matplotlib.figure import Figure

        figure = Figure(figsize=(6.4, 1.2 + 0.35 * len(labels)))
        axes = figure.add_subplot()
        left = np.zeros(len(labels))
        for severity, colour in zip(rules.SEVERITIES, ("#f0b429", "#b3261e"), strict=True):
            values = np.array([row[severity] for row in counts], dtype=float)
            axes.barh(labels, values, left=left, color=colour, label=severity)
            left += values
        axes.invert_yaxis()
        axes.set_xlabel("marks")
        axes.set_title("Errors by category and severity")
        axes.legend()
        figure.tight_layout()
        return figure
