"""Span agreement between two spans studies of the same captions (issue 47).

An imported ESA or MQM campaign has one annotator per text, so its own report cannot give
span agreement; the WMT23 ESA and MQM campaigns judged the same items, and their published
agreement (Kocmi et al. 2024: character F1 0.229, 0.176 with severity; spans matched 0.183,
0.127) is the agreement between the two. The report setting ``compare_study`` names the
other study; the report then pairs each annotator of a caption here with each annotator of
the same caption there (``rubrics.spans_agreement.span_agreement_between``). The same
measure compares the people of one study with each source of imported suggested spans (a
judge's, ``suggestion_agreement``).

The same caption: the same image name (an imported segment is ``batch#item``; a study
caption's image is its file name), system and text. Only a study every researcher of this
one may read is compared: the result is stored in this study's report, which all of them
see, so a member must not learn through it about a study shared only with someone else.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotation.models import Caption, Item, Study, User
from annotation.modes.spans.protocol import CAPTION
from rubrics import spans_agreement


def comparison(study: Study, other_id: int) -> dict[str, Any]:
    """The section ``compare`` of the report: the other study, the captions and pairs
    compared and the four statistics, or ``error`` saying why there are none."""
    other = Study.objects.filter(pk=other_id).select_related("owner").first()
    head: dict[str, Any] = {"study": other_id, "name": ""}
    # One answer for a study that does not exist, is of another mode or is not shared with
    # every researcher of this one: the report must not tell a member which ids exist.
    if (
        other is None
        or other.mode != study.mode
        or other.pk == study.pk
        or _readers(study) - _readers(other)
    ):
        return {
            **head,
            "error": f"study {other_id} is not another error-span study shared with every "
            "researcher of this study (this report, which they all see, compares only with "
            "such a study)",
        }
    head["name"] = other.name
    mine, theirs = _marks(study), _marks(other)
    shared = sorted(set(mine) & set(theirs))
    texts = [(len(key[2]), mine[key], theirs[key]) for key in shared]
    try:
        found = spans_agreement.span_agreement_between(texts)
    except ValueError as exc:
        return {**head, "captions": len(shared), "error": str(exc)}
    return {**head, **_figures(found)}


def suggestion_agreement(study: Study, shown: bool) -> list[dict[str, Any]]:
    """Per source of imported suggestions (a judge's spans, ``suggestions.py``): the span
    agreement between the people who marked a caption and that source's suggestions for
    it, over the captions both marked; ``shown`` says whether the annotators saw them (then
    an accepted suggestion is one of their marks, and agreement is higher by design)."""
    suggested: dict[int, dict[str, list[tuple[int, int, str]]]] = defaultdict(dict)
    items = Item.objects.filter(study=study, kind=CAPTION, spec__has_key="suggestions")
    for caption, suggestions in items.values_list("spec__caption", "spec__suggestions"):
        for found in suggestions or ():
            if found["start"] < found["end"]:
                marks = suggested[caption].setdefault(found["source"], [])
                marks.append((found["start"], found["end"], found["severity"]))
    if not suggested:
        return []
    people = _marks_by_caption(study, set(suggested))
    texts = dict(Caption.objects.filter(pk__in=set(people)).values_list("pk", "text"))
    sources = sorted({source for by_source in suggested.values() for source in by_source})
    out = []
    for source in sources:
        pairs = [
            (len(texts[caption]), marks, [suggested[caption].get(source, [])])
            for caption, marks in people.items()
            if source in suggested[caption]
        ]
        row: dict[str, Any] = {"source": source, "shown": shown}
        try:
            found = spans_agreement.span_agreement_between(pairs)
        except ValueError as exc:
            out.append({**row, "captions": len(pairs), "error": str(exc)})
            continue
        out.append({**row, **_figures(found)})
    return out


def _figures(found: spans_agreement.SpanAgreement) -> dict[str, Any]:
    """What the report stores of an agreement: the counts and the four statistics."""
    return {
        "captions": found.n_texts,
        "pairs": found.n_pairs,
        "char_f1": found.char_f1,
        "char_f1_severity": found.char_f1_severity,
        "matched": found.matched,
        "matched_severity": found.matched_severity,
    }


def _readers(study: Study) -> set[User]:
    """The researchers who may read the study (owner and members); staff read every study,
    so they are nobody's concern here."""
    members = set(study.members.filter(is_staff=False))
    return members | ({study.owner} if not study.owner.is_staff else set())


def _marks(study: Study) -> dict[tuple[str, str, str], list[list[tuple[int, int, str]]]]:
    """(image name, system, text) -> each kept judgment's marks with characters."""
    captions = {
        pk: (image or "", system, text)
        for pk, image, system, text in Caption.objects.filter(study=study).values_list(
            "pk", "image__name", "system", "text"
        )
    }
    out: dict[tuple[str, str, str], list[list[tuple[int, int, str]]]] = defaultdict(list)
    for caption, marks in _marks_by_caption(study).items():
        if caption in captions:
            out[captions[caption]].extend(marks)
    return out


def _marks_by_caption(
    study: Study, only: set[int] | None = None
) -> dict[int, list[list[tuple[int, int, str]]]]:
    """Caption id -> each kept judgment's marks with characters (of ``only`` if given)."""
    judged = study.judgments.filter(item__kind=CAPTION, excluded=False)
    out: dict[int, list[list[tuple[int, int, str]]]] = defaultdict(list)
    for caption, payload in judged.order_by("id").values_list("item__spec__caption", "payload"):
        if only is not None and caption not in only:
            continue
        out[caption].append(
            [
                (m["start"], m["end"], m["severity"])
                for m in payload.get("spans", ())
                # Omissions have no characters; an imported empty span neither.
                if not m.get("omission") and m["start"] < m["end"]
            ]
        )
    return out
