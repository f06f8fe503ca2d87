"""A judge's context answer: one description in one context, rated like a person's form.

The unit is a description in a context (``context_units``): the unit's second id is the
context's caption row, so one description in two contexts is two answers. The judge gets
the before-image questions and accuracy, all on 1-5, checked with the pages' own parsing;
its scores carry every group's names ("overall (BLV)", "overall (sighted)", ...), so the
alignment report compares the one answer with each group apart.

Two prompts (``prompt_versions``): a context-aware one, with the passage, the page's
title and the domain beside the image and the description (the default), and a
context-free one, with the image and the description only. Saved as two versions and run
by the same judge, the alignment report shows what knowing the context changes.
"""

from __future__ import annotations

from typing import Any

from annotation.errors import ServiceError
from annotation.models import Caption, Item, Study
from annotation.modes.base import Judging, parse_choice
from annotation.modes.context.captions import DOMAIN, TITLE
from annotation.modes.context.ratings import GROUP_LABELS, kept_ratings, score_rows
from annotation.modes.judging import GUIDELINES_END, GUIDELINES_HEADING
from rubrics.context.questions import BEFORE, QUESTIONS, SCALE_MAX, SCALE_MIN

#: What a judge answers: the before-image dimensions, then accuracy (it sees the image).
ANSWERED = (*BEFORE, "accuracy")
_QUESTION = {**QUESTIONS[0], "accuracy": QUESTIONS[1]["accuracy"]}
CONTEXT_AWARE, CONTEXT_FREE = "context-aware", "context-free"


class ContextJudging(Judging):
    unit = "caption"
    context_units = True
    answer_help = (
        '{"overall": 1-5, "imaginability": 1-5, "relevance": 1-5, "irrelevance": 1-5, '
        '"accuracy": 1-5} (one description in one context; import it by item_id)'
    )

    def clean_answer(self, study: Study, captions: list[Any], data: Any) -> dict[str, Any]:
        if len(captions) != 2:
            # A caption alone names no context: the same description is judged in several.
            raise ServiceError(
                "item_id: name the item (a description in one context), not the caption alone.",
                field="item_id",
            )
        if not isinstance(data, dict):
            raise ServiceError("answer: give the ratings as a JSON object.", field="answer")
        clean, problems = {}, []
        for name in ANSWERED:
            message = (
                f"answer.{name}: {_QUESTION[name].short}, a whole number from {SCALE_MIN} to "
                f"{SCALE_MAX}."
            )
            try:
                clean[name] = parse_choice(
                    data.get(name), low=SCALE_MIN, high=SCALE_MAX, field=name, message=message
                )
            except ServiceError as exc:
                problems.append(exc.message)
        if problems:
            raise ServiceError(" ".join(problems), field="answer")
        return clean

    def scores(self, answer: dict[str, Any]) -> dict[str, float]:
        """The answer under each group's score names (``ratings.score_rows``): the judge
        also saw the image, so its overall stands beside the sighted raters' after it."""
        out = {}
        for dim in BEFORE:
            for label in GROUP_LABELS.values():
                out[f"{dim} ({label})"] = float(answer[dim])
        out["accuracy (sighted)"] = float(answer["accuracy"])
        out["overall after image (sighted)"] = float(answer["overall"])
        return out

    def scale(self, study: Study) -> dict[str, tuple[int, int]]:
        return {name: (SCALE_MIN, SCALE_MAX) for name in self.scores(dict.fromkeys(ANSWERED, 1))}

    def human_scores(self, study: Study) -> dict[str, list[tuple[Any, float]]]:
        """Every kept rating keyed by its unit, (description, context)."""
        rows = score_rows(kept_ratings(study))
        return {
            name: [((caption, context), value) for caption, value, context in values]
            for name, values in rows.items()
        }

    def item_unit(self, item: Item) -> tuple[int, int | None] | None:
        return (item.spec["caption"], item.spec["context"])

    def units(self, study: Study) -> list[tuple[int | None, int, int | None]]:
        """One unit per description and context: its first item (a BLV and a sighted
        item ask the same question)."""
        out: dict[tuple[int, int], int] = {}
        rows = Item.objects.filter(study=study).order_by("id").values_list("pk", "kind", "spec")
        for pk, _, spec in rows:
            out.setdefault((spec["caption"], spec["context"]), pk)
        return [(item, caption, context) for (caption, context), item in out.items()]

    def prompt_fields(
        self, study: Study, units: list[tuple[int | None, int, int | None]]
    ) -> dict[tuple[int, int | None], dict[str, str]]:
        contexts = {second for _, _, second in units if second is not None}
        rows = Caption.objects.filter(study=study, pk__in=contexts).values_list(
            "pk", "raw_text", "spec"
        )
        by_pk = {pk: (text, spec) for pk, text, spec in rows}
        out: dict[tuple[int, int | None], dict[str, str]] = {}
        for _, first, second in units:
            if second in by_pk:
                text, spec = by_pk[second]
                out[(first, second)] = {
                    "context": text,
                    "title": spec.get(TITLE, ""),
                    "domain": spec.get(DOMAIN, ""),
                }
        return out

    def task_prompt(self, study: Study) -> str:
        """The context-aware question (the default prompt's, after the guidelines)."""
        return _prompt(with_context=True)

    def prompt_versions(self, study: Study) -> dict[str, str]:
        """Both prompts, each after the study's guidelines as ``default_prompt`` puts them."""
        guide = self.mode.guidelines(study).text
        return {
            name: f"{GUIDELINES_HEADING}\n\n{guide}\n\n{GUIDELINES_END}\n\n{task}"
            if guide
            else task
            for name, task in (
                (CONTEXT_AWARE, _prompt(with_context=True)),
                (CONTEXT_FREE, _prompt(with_context=False)),
            )
        }


def _prompt(*, with_context: bool) -> str:
    """The questions with their scales' words, and the reply format."""
    questions = "\n".join(
        f"- {name}: {_QUESTION[name].text} "
        + ", ".join(f"{n} = {word}" for n, word in enumerate(_QUESTION[name].scale, start=1))
        for name in ANSWERED
    )
    reply = ", ".join(f'"{name}": <1-5>' for name in ANSWERED)
    if with_context:
        where = (
            "The image appears on a web page. Read where it appears, then the description "
            "written for people who cannot see the image, and rate the description for "
            "this page.\n\nDomain: {domain}\nPage title or purpose: {title}\n"
            "Text around the image:\n{context}\n\n"
        )
    else:
        where = "Read the description written for people who cannot see the image and rate it.\n\n"
    return (
        f"{where}Description: {{caption}}\n\nAnswer each question on 1 to 5:\n{questions}\n\n"
        f"Reply with only a JSON object: {{{reply}}}"
    )


__all__ = ["CONTEXT_AWARE", "CONTEXT_FREE", "ContextJudging"]
