"""Which task guidelines the people and each judge of a study were given (issue 46, row
5), for the judges' alignment report: people and judge should answer the same question.

A judgment stores the version of the guidelines its page showed
(``Judgment.guidelines_version``); a judge run's prompt stores the version its text holds
(``JudgePrompt.guidelines_version``, "" when the prompt holds none of them). A judge is
matched to its prompt by the label its answers were stored under (``v3``); an imported
judge has no prompt here, so its version is unknown.
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Count

from annotation.models import Judge, JudgePrompt, Judgment, Study
from annotation.modes.base import Mode

_LABEL = re.compile(r"^v(\d{1,9})$")


def guidelines_versions(study: Study, judges: list[Judge], mode: Mode) -> dict[str, Any]:
    """``{"current", "people": [{version, judgments}], "unrecorded", "judges": {judge id:
    version or None (unknown)}, "warnings": [sentences]}``. ``mode``: the study's."""
    counts = (
        Judgment.objects.filter(study=study)
        .values("guidelines_version")
        .annotate(n=Count("id"))
        .order_by("-n", "guidelines_version")
    )
    people = [{"version": row["guidelines_version"], "judgments": row["n"]} for row in counts]
    unrecorded = sum(row["judgments"] for row in people if not row["version"])
    people = [row for row in people if row["version"]]
    prompts = dict(
        JudgePrompt.objects.filter(study=study).values_list("version", "guidelines_version")
    )
    seen = {row["version"] for row in people}
    by_judge: dict[int, str | None] = {}
    warnings = []
    if len(seen) > 1:
        warnings.append(
            f"People were shown {len(seen)} versions of the guidelines (they changed while "
            "the study ran): "
            + ", ".join(f"{row['version']} ({row['judgments']} judgments)" for row in people)
            + "."
        )
    for judge in judges:
        found = _LABEL.match(judge.prompt_version or "")
        held = prompts.get(int(found.group(1))) if found else None
        by_judge[judge.pk] = held
        if held is None or not seen:
            continue
        if not held:
            warnings.append(
                f"{judge}'s prompt holds none of the study's guidelines: it was not asked "
                "the question the people answered."
            )
        elif held not in seen:
            warnings.append(
                f"{judge} was asked with guidelines {held}; the people were shown "
                + ", ".join(sorted(seen))
                + ". They did not answer the same question."
            )
    return {
        "current": mode.guidelines(study).version,
        "people": people,
        "unrecorded": unrecorded,
        "judges": by_judge,
        "warnings": warnings,
    }
