"""THumB's caption groups written out in Python (issue 48, ``annotation/modes/thumb/form.py``)
give the page the HTML its template loop gave, character for character: every kind of page,
stored and sent values, a review's "was" labels, and a refused page's problems beside each
kind of field, with text that needs escaping."""

import itertools

import pytest
from django.template import engines

from annotation.modes.thumb.form import caption_groups_html
from annotation.modes.thumb.pages import ThumbPages
from annotation.modes.thumb.stages import CHECK, FLUENCY, STAGE1, STAGE2

#: The item page's loop over its caption groups before it was written out (item.html).
OLD_LOOP = """{% for g in groups %}
<section class="cap" id="{{ g.key }}" aria-labelledby="{{ g.key }}-h" data-group="{{ g.key }}">
<h2 id="{{ g.key }}-h">Caption {{ g.number }} of {{ groups|length }}</h2>
<p class="cap-text" id="{{ g.key }}-text">{{ g.text }}</p>
{% if kind != "fluency" %}
{% for field, label, options, was in g.scales %}{% with name=g.key|add:"-"|add:field %}<fieldset class="scale" id="{{ name }}" data-was="{{ was }}"{% if name in error_fields %} aria-describedby="{{ name }}-err"{% endif %}>
<legend>{{ label }}, 1–5{% if was != "" %} <span class="was">({{ reviewed_label }}: {{ was }})</span>{% endif %}</legend>
{% for o in options %}<label><input type="radio" name="{{ name }}" value="{{ o.value }}"{% if o.checked %} checked{% endif %}> {{ o.value }}</label>{% endfor %}
{% if name in error_fields %}<p class="field-error" id="{{ name }}-err">{% for problem in field_errors %}{% if problem.field == name %}{{ problem.message }}{% endif %}{% endfor %}</p>{% endif %}
</fieldset>{% endwith %}{% endfor %}
{% endif %}
<details class="flu" id="{{ g.key }}-fluency"{% if g.fluency_count or g.fields.fluency in error_fields %} open{% else %}{% for f in g.fluency_fields %}{% if f in error_fields %}{% ifchanged "open" %} open{% endifchanged %}{% endif %}{% endfor %}{% endif %}>
<summary>Fluency errors: <span data-flu-summary>{{ g.fluency_count }} ticked</span>{% if g.was_fluency %} <span class="was">({{ reviewed_label }}: {{ g.was_fluency }})</span>{% endif %}</summary>
<fieldset><legend class="visually-hidden">Fluency errors of caption {{ g.number }}</legend>
{% for e in g.fluency %}<div><label><input type="checkbox" name="{{ g.key }}-fluency" value="{{ e.key }}"{% if e.penalty %} data-penalty="{{ e.penalty }}"{% endif %}{% if e.checked %} checked{% endif %}> {{ e.label }} ({% if e.penalty %}−{{ e.penalty }}{% else %}−{{ e.low }} to −{{ e.high }}{% endif %})</label>{% if not e.penalty %} <label class="amount">amount<span class="visually-hidden"> of this error, caption {{ g.number }}</span> <input type="number" id="{{ e.field }}" name="{{ e.field }}" min="{{ e.low }}" max="{{ e.high }}" step="{{ e.step }}" value="{{ e.amount }}"{% if e.field in error_fields %} aria-describedby="{{ e.field }}-err"{% endif %}></label>{% if e.field in error_fields %}<p class="field-error" id="{{ e.field }}-err">{% for problem in field_errors %}{% if problem.field == e.field %}{{ problem.message }}{% endif %}{% endfor %}</p>{% endif %}{% endif %}</div>{% endfor %}
{% if g.fields.fluency in error_fields %}<p class="field-error">{% for problem in field_errors %}{% if problem.field == g.fields.fluency %}{{ problem.message }}{% endif %}{% endfor %}</p>{% endif %}
</fieldset></details>
{% if kind != "fluency" %}
{% for field, label, options, was in g.penalties %}{% with name=g.key|add:"-"|add:field %}<fieldset class="pen" id="{{ name }}"{% if name in error_fields %} aria-describedby="{{ name }}-err"{% endif %}>
<legend>{{ label }}{% if was != "" %} <span class="was">({{ reviewed_label }}: {{ was }})</span>{% endif %}</legend>
{% for o in options %}<label><input type="radio" name="{{ name }}" value="{{ o.value }}"{% if o.checked %} checked{% endif %}> {{ o.text }}</label>{% endfor %}
{% if name in error_fields %}<p class="field-error" id="{{ name }}-err">{% for problem in field_errors %}{% if problem.field == name %}{{ problem.message }}{% endif %}{% endfor %}</p>{% endif %}
</fieldset>{% endwith %}{% endfor %}
<p class="total">Total: <output id="{{ g.key }}-total" aria-live="polite">{{ g.total|default:"—" }}</output></p>
{% if reviewed_label %}{% with name=g.key|add:"-confirm" %}<div class="confirm" id="{{ name }}">
<label><input type="checkbox" name="{{ name }}" value="yes"{% if g.confirmed %} checked{% endif %}{% if name in error_fields %} aria-describedby="{{ name }}-err" aria-invalid="true"{% endif %}> I checked this caption against the image</label>
{% if name in error_fields %}<p class="field-error" id="{{ name }}-err">{% for problem in field_errors %}{% if problem.field == name %}{{ problem.message }}{% endif %}{% endfor %}</p>{% endif %}
</div>{% endwith %}{% endif %}
{% endif %}
</section>
{% endfor %}"""  # noqa: E501

GROUPS = [
    {"key": "c1", "text": 'A <b>dog</b> & a "cat" on Tom\'s mat.'},
    {"key": "c2", "text": "Two people near a table."},
    {"key": "c3", "text": "Plain caption."},
]
#: A reviewed stage's stored scores (stage 1 for stage 2, stage 2 for the check).
BEFORE = {
    "precision": 4,
    "recall": 3,
    "fluency_errors": {"casing": 0.5, "awkward_construction": 0.3},
    "fluency": 0.8,
    "conciseness": 0.5,
    "inclusive": 2.0,
    "total": 1.2,
}
#: What a refused submission sent back (parse_form's shape), odd text included.
SENT = {
    "precision": "5",
    "recall": "",
    "fluency_errors": {"awkward_construction": "0.<4", "casing": None},
    "conciseness": "0",
    "confirmed": True,
}
LABELS = {STAGE1: "", STAGE2: "stage 1", FLUENCY: "", CHECK: "stage 2"}


def _problems(key):
    """Problems on every kind of field of one group, one field twice, one with markup."""
    return [
        {"field": f"{key}-precision", "message": "choose a <precision> score"},
        {"field": f"{key}-recall", "message": "choose a recall score."},
        {"field": f"{key}-recall", "message": " And again."},
        {"field": f"{key}-inclusive", "message": "bad inclusive"},
        {"field": f"{key}-amount-awkward_construction", "message": "amount & range"},
        {"field": f"{key}-fluency", "message": "fluency malformed"},
        {"field": f"{key}-confirm", "message": "tick \u201cI checked\u201d"},
    ]


def _groups(kind, before, answers):
    return [
        ThumbPages._group_context(number, group, before, kind=kind, answers=answers)
        for number, group in enumerate(GROUPS, start=1)
    ]


CASES = list(
    itertools.product(
        (STAGE1, STAGE2, FLUENCY, CHECK),
        (None, BEFORE),
        (None, SENT),
        ((), ("c1",), ("c1", "c3")),
    )
)


@pytest.mark.parametrize(("kind", "before", "answers", "wrong"), CASES)
def test_the_groups_are_the_old_loops_html(kind, before, answers, wrong):
    groups = _groups(kind, before, answers)
    field_errors = [problem for key in wrong for problem in _problems(key)]
    context = {
        "groups": groups,
        "kind": kind,
        "reviewed_label": LABELS[kind],
        "field_errors": field_errors,
        "error_fields": [problem["field"] for problem in field_errors],
    }
    old = engines["django"].from_string(OLD_LOOP).render(context)
    new = caption_groups_html(
        groups, kind=kind, reviewed_label=LABELS[kind], field_errors=field_errors
    )
    assert new == old
    # The cases show what they are about (not a page that lost its fields on both sides).
    assert new.count("<section") == len(GROUPS)
    assert ('class="field-error"' in new) == bool(wrong)
    assert ('class="was"' in new) == bool(before and LABELS[kind])
