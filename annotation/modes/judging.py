"""The mode contract's ``Judging`` component: how an automatic judge (a VLM or a metric;
``annotation/models/judges.py``) answers a mode's questions, and the helpers its prompts
and replies share. Re-exported by ``modes/base.py`` with the rest of the contract; kept
apart so that ``base.py`` stays readable in one sitting.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from annotation.errors import ServiceError
from annotation.models import Caption, Item, Study
from annotation.modes.components import ModeOf
from annotation.text import json_problem, nesting_problem, text_problem

#: The lines around the guidelines in a default prompt (``default_prompt``).
GUIDELINES_HEADING = "Task guidelines (the people who judge this study read the same text):"
GUIDELINES_END = "(End of the guidelines.)"


class Judging:
    """How an automatic judge (a VLM or a metric; ``annotation/models/judges.py``) answers
    the mode's questions, and how its answer becomes the score the report gives humans.

    A judge answers one *unit*: a caption (``unit = "caption"``: THumB, VICR, spans) or an
    ordered pair of captions, the first one shown first (``unit = "pair"``: HUMANr, the
    arena). ``clean_answer`` checks an answer with the mode's own parsing (the rules the
    pages apply to people, without the lease and phase checks a person's answer needs);
    ``scores`` turns the clean answer into ``{score name: value}``: for a caption unit the
    names of ``human_scores``, for a pair unit ``{"choice": 0 | 0.5 | 1}`` (0: the caption
    shown first preferred, 1: the second, 0.5: a tie), the coding of ``human_pairs``.
    The default: the mode takes no judge (``unit = ""``; ``clean_answer`` refuses).
    """

    unit: ClassVar[str] = ""
    #: What the answer fields are, shown in the docs and the API.
    answer_help: ClassVar[str] = ""
    #: A caption unit judged in a context (``unit = "caption"`` only): the unit's second
    #: id is the caption row of the context the caption is shown in, not a caption it is
    #: compared with. One caption in two contexts is then two units (stored apart by the
    #: pair's unique constraint, so no other table is needed), never swapped, and the
    #: alignment report keys them ``(caption, context)``, as ``human_scores`` must.
    context_units: ClassVar[bool] = False
    #: The per-system estimate of the "people + judge" report (issue 40;
    #: ``services/people_judges.py``): ``"mean"`` of a per-unit score (caption units),
    #: ``"share"`` (per system, the mean of each pair's outcome oriented to the system:
    #: ``people_values`` and ``judge_values`` say how) or ``"bradley_terry"`` (pair
    #: units: each human vote a battle, ``human_battles``, against the judge's choice).
    estimate: ClassVar[str] = "mean"

    def __init__(self, mode: ModeOf):
        self.mode = mode

    def clean_answer(self, study: Study, captions: list[Any], data: Any) -> dict[str, Any]:
        """The clean answer to store, or ServiceError naming the field.

        ``captions`` are the unit's ``Caption`` rows (one, or two in the order shown).
        """
        raise ServiceError(f"The {self.mode.label} mode takes no judge answers.")

    def scores(self, answer: dict[str, Any]) -> dict[str, float]:
        """The report's per-unit score(s) of a clean answer (see the class doc)."""
        raise NotImplementedError

    def scale(self, study: Study) -> dict[str, tuple[int, int]]:
        """``{score name: (lowest, highest)}`` of whole-number caption scores (kappa, the
        confusion matrix); others are continuous. Default: none."""
        return {}

    def item_unit(self, item: Item) -> tuple[int, int | None] | None:
        """The unit an item asks about (imports keyed by ``item_id``); None: none."""
        return None

    def human_scores(self, study: Study) -> dict[str, list[tuple[int, float]]]:
        """Caption-level human scores ``{name: [(caption id, value), ...]}`` (one row per
        human rating) the judge's ``scores`` are compared with. Default: the report's."""
        return self.mode.report.human_scores(study)[0]

    def human_labels(self, study: Study) -> list[tuple[int, Any, Any]]:
        """Human labels ``(participant id, unit, label)`` for Dawid-Skene with judges as
        raters: a caption id and the first ``scale`` score, or a pair ``(lower id, higher)``
        and ``"first"``/``"second"``/``"tie"`` in that order. Default: none."""
        return []

    def human_pairs(self, study: Study) -> list[tuple[int, int, int]]:
        """Human pairwise choices ``(caption a, caption b, 0 | 1)`` over every group.
        Default: the report's ``human_pairs``."""
        return [row for rows in self.mode.report.human_pairs(study).values() for row in rows]

    # -- people and a judge together (services/people_judges.py, issue 40)

    def people_values(self, study: Study) -> dict[str, dict[Any, list[float]]]:
        """``{score: {unit: [human values]}}`` a ``"mean"`` or ``"share"`` estimate reads,
        every kept rating of the unit (the estimate takes their mean: one observation per
        unit). Units keyed as the judge's answers are (``judge_values``). Default: the
        caption units of ``human_scores``."""
        out: dict[str, dict[Any, list[float]]] = {}
        for score, rows in self.human_scores(study).items():
            per_unit: dict[Any, list[float]] = {}
            for unit, value in rows:
                per_unit.setdefault(unit, []).append(float(value))
            out[score] = per_unit
        return out

    def judge_values(
        self, study: Study, answers: list[tuple[int, int | None, dict[str, Any], dict[str, float]]]
    ) -> dict[str, dict[Any, float]]:
        """``{score: {unit: value}}`` of one judge's ``answers`` (rows ``(caption, second
        caption or None, answer, scores)``, every run): a unit answered in several runs
        takes the mean of its runs (a better prediction, and PPI is valid for any fixed
        one). Default: caption units keyed as ``human_scores`` keys them."""
        sums: dict[str, dict[Any, list[float]]] = {}
        for first, second, _answer, scores in answers:
            unit = (first, second) if self.context_units else first
            for score, value in scores.items():
                sums.setdefault(score, {}).setdefault(unit, []).append(float(value))
        return {
            score: {unit: sum(v) / len(v) for unit, v in per_unit.items()}
            for score, per_unit in sums.items()
        }

    def unit_systems(self, study: Study, units: set[Any]) -> dict[Any, str]:
        """The system each unit scores (a unit of no system is left out). Default: the
        system of the unit's caption (the first id of a tuple unit)."""
        # The study's captions in one query (no IN list of 100k ids).
        systems = dict(Caption.objects.filter(study=study).values_list("pk", "system"))
        out = {}
        for unit in units:
            system = systems.get(unit[0] if isinstance(unit, tuple) else unit)
            if system is not None:
                out[unit] = system
        return out

    def human_battles(self, study: Study) -> list[tuple[int, int, float]]:
        """People's battles for a ``"bradley_terry"`` estimate: ``(caption a, caption b,
        y)``, y in [0, 1] the share of the battle b won, one row per vote. Default:
        ``human_pairs`` (decisive votes)."""
        return [(a, b, float(choice)) for a, b, choice in self.human_pairs(study)]

    # -- running a judge through the platform (services/judge_runs.py)

    def units(self, study: Study) -> list[tuple[int | None, int, int | None]]:
        """Every question a judge run asks: ``(item id or None, caption, second caption or
        None)``, each unit once. Default: ``item_unit`` of each of the study's items."""
        out: dict[tuple[int, int | None], int | None] = {}
        for item in Item.objects.filter(study=study).order_by("id"):
            unit = self.item_unit(item)
            if unit is not None:
                out.setdefault(unit, item.pk)
        return [(item, first, second) for (first, second), item in out.items()]

    def default_prompt(self, study: Study) -> str:
        """The prompt template a study starts with: the study's task guidelines, the text
        its participants read (``Mode.guidelines``; issue 46: people and judge answer the
        same question), then ``task_prompt``. Not overridden: a mode words its question
        in ``task_prompt``."""
        task = self.task_prompt(study)
        guide = self.mode.guidelines(study).text
        if not task or not guide:
            return task
        return f"{GUIDELINES_HEADING}\n\n{guide}\n\n{GUIDELINES_END}\n\n{task}"

    def task_prompt(self, study: Study) -> str:
        """The mode's question: the protocol's own rubric wording and the reply format
        ``parse_reply`` reads. Placeholders: ``{caption}`` (caption units),
        ``{caption_a}`` and ``{caption_b}`` (pair units, a shown first); the image is sent
        beside the text. Default: none (the mode takes no judge)."""
        return ""

    def prompt_fields(
        self, study: Study, units: list[tuple[int | None, int, int | None]]
    ) -> dict[tuple[int, int | None], dict[str, str]]:
        """Placeholder values beyond the caption's, per unit ``(first, second)`` of
        ``units`` (``Judging.units``' rows): a mode whose judge must know more than the
        caption and the image (the context a caption is read in) names them here, read in
        one query, and its prompts use them (``{context}``). A template may leave any of
        them out (a context-free prompt). Default: none."""
        return {}

    def prompt_versions(self, study: Study) -> dict[str, str]:
        """Named prompts a researcher may start a version from, beside ``default_prompt``
        (a context-aware and a context-free one, to compare in the alignment report).
        Default: none."""
        return {}

    def parse_reply(self, text: str) -> Any:
        """The answer data in a judge's reply text, for ``clean_answer``; ValueError when
        there is none. Default: the first JSON object in the text (a reply wrapped in a
        Markdown code fence or a sentence is read too). A mode reads JSON with
        ``json_object``, which refuses deep nesting before ``json`` recurses."""
        return json_object(text)

    def read_reply(self, text: str) -> Any:
        """``parse_reply`` behind the checks every mode's replies pass (the one parser a
        judge run calls; not overridden): ValueError when the reply's text, or any string
        in its answer (keys too), holds what ``annotation.text`` refuses in stored text.
        PostgreSQL refuses NUL in ``text`` and in ``jsonb`` (``\\u0000``), half a surrogate
        pair cannot be encoded, and the run stores the raw reply and the answer: one such
        reply would fail the run's whole transaction (issue 45)."""
        problem = text_problem(text, max_length=None, multiline=True)
        if problem is not None:
            raise ValueError(f"the reply {problem}")
        data = self.parse_reply(text)
        problem = json_problem(data, "answer")
        if problem is not None:
            raise ValueError(problem)
        return data


def json_object(text: str) -> dict[str, Any]:
    """The JSON object in ``text`` from its first ``{`` to its last ``}``; ValueError if
    there is none: judges often wrap the object in a code fence or a sentence."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("the reply holds no JSON object")
    # Scanned as ``json`` will read it (the same slice, from its first ``{``): ``json``
    # recurses once per level and, thousands deep, raises RecursionError, not ValueError.
    problem = nesting_problem(text[start : end + 1])
    if problem is not None:
        raise ValueError(f"the reply's JSON object {problem}")
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the reply's JSON object is malformed ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ValueError("the reply holds no JSON object")
    return data


def fill_prompt(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``{name}`` of ``values`` replaced; other braces (a JSON
    example in the prompt) are left as written, unlike ``str.format``. One pass: a value
    that holds a placeholder (a caption or a context passage quoting ``{caption}``) is
    inserted as it is, never filled in turn."""
    if not values:
        return template
    names = "|".join(re.escape(name) for name in sorted(values, key=len, reverse=True))
    return re.sub("\\{(" + names + ")\\}", lambda match: values[match.group(1)], template)
