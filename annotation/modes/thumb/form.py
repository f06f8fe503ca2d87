"""The item page's caption groups as HTML, built in Python (issue 48).

A THumB page shows several caption groups (five in THumB 1.0), each with two score scales,
two penalties, seven fluency error types and a review's "was" labels: rendered by the
template engine, the groups' loop was about half of a GET next's CPU (some 1,300 template
nodes a page). Here the same markup is written out with format strings, every value escaped
as the template escaped it; ``templatetags/thumb_form.py`` puts it in ``item.html`` (its
``{% caption_groups %}``), and ``tests/annotation/test_thumb_hot_path_form.py`` checks the
result is the old template's, character for character.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any

#: What the page is for a kind that shows only the fluency errors (``pages.item_context``).
FLUENCY_ONLY = "fluency"


def caption_groups_html(
    groups: list[dict[str, Any]],
    *,
    kind: str,
    reviewed_label: str,
    field_errors: Iterable[dict[str, str]] = (),
) -> str:
    """Every group's ``<section>`` (``pages.ThumbPages._group_context``'s dicts), with the
    refused submission's problems (``field_errors``: field and message) beside their
    fields. Not marked safe: the caller does (every value in it is escaped here)."""
    errors = list(field_errors)
    error_fields = {problem["field"] for problem in errors}
    count = len(groups)
    label = escape(reviewed_label)
    parts = []
    for g in groups:
        parts.append(_group(g, count, kind, label, errors, error_fields))
    return "".join(parts)


def _messages(errors: list[dict[str, str]], field: str) -> str:
    """The messages of ``field``'s problems, as the template joined them (no separator)."""
    return "".join(escape(str(p["message"])) for p in errors if p["field"] == field)


def _error(errors, error_fields, name: str, *, with_id: bool = True) -> str:
    if name not in error_fields:
        return ""
    id_attr = f' id="{escape(name)}-err"' if with_id else ""
    return f'<p class="field-error"{id_attr}>{_messages(errors, name)}</p>'


def _described(error_fields, name: str) -> str:
    return f' aria-describedby="{escape(name)}-err"' if name in error_fields else ""


def _was(label: str, was: str) -> str:
    return f' <span class="was">({label}: {escape(was)})</span>' if was != "" else ""


def _group(g, count, kind, label, errors, error_fields) -> str:
    key = escape(g["key"])
    number = g["number"]
    out = [
        f'\n<section class="cap" id="{key}" aria-labelledby="{key}-h" data-group="{key}">\n'
        f'<h2 id="{key}-h">Caption {number} of {count}</h2>\n'
        f'<p class="cap-text" id="{key}-text">{escape(g["text"])}</p>\n'
    ]
    scored = kind != FLUENCY_ONLY
    if scored:
        out.append("\n")
        for field, legend, options, was in g["scales"]:
            out.append(_radios(g, field, legend, options, was, label, errors, error_fields))
        out.append("\n")
    out.append("\n")
    out.append(_fluency(g, key, number, label, errors, error_fields))
    if scored:
        out.append("\n")
        for field, legend, options, was in g["penalties"]:
            out.append(
                _radios(g, field, legend, options, was, label, errors, error_fields, scale=False)
            )
        total = escape(g["total"]) if g["total"] else "—"
        out.append(
            f'\n<p class="total">Total: <output id="{key}-total" aria-live="polite">{total}'
            "</output></p>\n"
        )
        if label:
            out.append(_confirm(g, errors, error_fields))
        out.append("\n")
    out.append("\n</section>\n")
    return "".join(out)


def _radios(g, field, legend, options, was, label, errors, error_fields, *, scale=True) -> str:
    """A score scale's fieldset (``scale``: its 1-5 points, its "was" value as data) or a
    penalty's (each option's own text)."""
    raw = f"{g['key']}-{field}"
    name = escape(raw)
    shown = "value" if scale else "text"
    radios = "".join(
        f'<label><input type="radio" name="{name}" value="{escape(o["value"])}"'
        f"{' checked' if o['checked'] else ''}> {escape(o[shown])}</label>"
        for o in options
    )
    error = _error(errors, error_fields, raw)
    if scale:
        head = f'<fieldset class="scale" id="{name}" data-was="{escape(was)}"'
        legend_text = f"{escape(legend)}, 1–5"
    else:
        head = f'<fieldset class="pen" id="{name}"'
        legend_text = escape(legend)
    return (
        f"{head}{_described(error_fields, raw)}>\n"
        f"<legend>{legend_text}{_was(label, was)}</legend>\n"
        f"{radios}\n{error}\n</fieldset>"
    )


def _fluency(g, key, number, label, errors, error_fields) -> str:
    """The group's fluency errors: a ``<details>``, open when any is ticked or refused."""
    fluency_field = g["fields"]["fluency"]
    opened = (
        g["fluency_count"]
        or fluency_field in error_fields
        or any(f in error_fields for f in g["fluency_fields"])
    )
    was_fluency = (
        f' <span class="was">({label}: {escape(g["was_fluency"])})</span>'
        if g["was_fluency"]
        else ""
    )
    out = [
        f'<details class="flu" id="{key}-fluency"{" open" if opened else ""}>\n'
        f"<summary>Fluency errors: <span data-flu-summary>{g['fluency_count']} ticked</span>"
        f"{was_fluency}</summary>\n"
        f'<fieldset><legend class="visually-hidden">Fluency errors of caption {number}'
        "</legend>\n"
    ]
    for e in g["fluency"]:
        penalty = e["penalty"]
        if penalty:
            shown = f"−{escape(penalty)}"
            data = f' data-penalty="{escape(penalty)}"'
        else:
            shown = f"−{escape(e['low'])} to −{escape(e['high'])}"
            data = ""
        row = (
            f'<div><label><input type="checkbox" name="{key}-fluency" value="{escape(e["key"])}"'
            f"{data}{' checked' if e['checked'] else ''}> {escape(e['label'])} ({shown})</label>"
        )
        if not penalty:
            field = escape(e["field"])
            row += (
                ' <label class="amount">amount<span class="visually-hidden"> of this error, '
                f'caption {number}</span> <input type="number" id="{field}" name="{field}" '
                f'min="{escape(e["low"])}" max="{escape(e["high"])}" step="{escape(e["step"])}" '
                f'value="{escape(str(e["amount"]))}"{_described(error_fields, e["field"])}></label>'
                f"{_error(errors, error_fields, e['field'])}"
            )
        out.append(row + "</div>")
    out.append("\n")
    out.append(_error(errors, error_fields, fluency_field, with_id=False))
    out.append("\n</fieldset></details>\n")
    return "".join(out)


def _confirm(g, errors, error_fields) -> str:
    """A review's "I checked this caption" box."""
    raw = f"{g['key']}-confirm"
    name = escape(raw)
    invalid = f' aria-describedby="{name}-err" aria-invalid="true"' if raw in error_fields else ""
    return (
        f'<div class="confirm" id="{name}">\n'
        f'<label><input type="checkbox" name="{name}" value="yes"'
        f"{' checked' if g['confirmed'] else ''}{invalid}> I checked this caption "
        "against the image</label>\n"
        f"{_error(errors, error_fields, raw)}\n</div>"
    )
