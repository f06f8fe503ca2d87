"""The error-span page's caption, option lists and fallback rows, built in Python since
issue 48, give the HTML the template loops they replace gave: the page's script selects
words by these spans' code-point offsets, so a changed byte would move a mark."""

from django.template import engines
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.modes.spans.pages import _options, caption_html, fallback_rows, words

#: The template loops as they were before issue 48 (``modes/spans/item.html``).
OLD_CAPTION = engines["django"].from_string(
    "{% for p in pieces %}{% if p.word %}"
    '<span class="w" data-start="{{ p.start }}" data-end="{{ p.end }}">{{ p.text }}</span>'
    "{% else %}{{ p.text }}{% endif %}{% endfor %}"
)
OLD_OPTIONS = engines["django"].from_string(
    '{% for c in values %}<option value="{{ c }}"{% if chosen == c %} selected{% endif %}>'
    "{{ c }}</option>{% endfor %}"
)

OLD_ROWS = engines["django"].from_string(
    "{% load l10n %}{% localize off %}{% for i in rows %}\n"
    '      <div class="spans-row">\n'
    '        <label>Start <input type="number" name="span-{{ i }}-start" min="0"'
    ' max="{{ length }}" inputmode="numeric"></label>\n'
    '        <label>End <input type="number" name="span-{{ i }}-end" min="1"'
    ' max="{{ length }}" inputmode="numeric"></label>\n'
    '        <label>Severity <select name="span-{{ i }}-severity">{{ severity_options }}'
    "</select></label>\n"
    '        <label>Category <select name="span-{{ i }}-category">{{ category_options }}'
    "</select></label>\n"
    '        <label>Note <input type="text" name="span-{{ i }}-note" maxlength="500"></label>\n'
    "      </div>\n"
    "      {% endfor %}{% endlocalize %}"
)

# Words, runs of spaces and newlines, markup characters, and code points above the BMP
# (one code point in Python, two UTF-16 units in JavaScript).
CAPTIONS = st.text(
    alphabet=st.sampled_from(list("ab c\n\t<>&\"'é") + ["\U0001f436", "\u00a0"]),
    max_size=60,
)


def test_a_hand_worked_caption():
    html = caption_html(' A "dog" <b> & 🐶 ')
    assert html == (
        ' <span class="w" data-start="1" data-end="2">A</span> '
        '<span class="w" data-start="3" data-end="8">&quot;dog&quot;</span> '
        '<span class="w" data-start="9" data-end="12">&lt;b&gt;</span> '
        '<span class="w" data-start="13" data-end="14">&amp;</span> '
        '<span class="w" data-start="15" data-end="16">🐶</span> '
    )


@settings(max_examples=300, deadline=None)
@given(CAPTIONS)
def test_the_caption_is_what_the_template_loop_gave(text):
    assert str(caption_html(text)) == OLD_CAPTION.render({"pieces": words(text)})


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet=st.sampled_from(list("ab <>&\"'é")), max_size=8), max_size=6),
    st.one_of(st.none(), st.text(alphabet=st.sampled_from(list("ab<&")), max_size=3)),
)
def test_the_options_are_what_the_template_loop_gave(values, chosen):
    expected = OLD_OPTIONS.render({"values": values, "chosen": chosen})
    assert str(_options(values, chosen)) == expected


@settings(max_examples=100, deadline=None)
@given(
    st.integers(min_value=0, max_value=30),
    st.integers(min_value=0, max_value=20_000),
    st.lists(st.text(alphabet=st.sampled_from(list("ab <>&\"'é")), max_size=8), max_size=4),
)
def test_the_fallback_rows_are_what_the_template_loop_gave(count, length, categories):
    severities, options = _options(["minor", "major"]), _options(categories)
    expected = OLD_ROWS.render(
        {
            "rows": range(count),
            "length": length,
            "severity_options": severities,
            "category_options": options,
        }
    )
    assert str(fallback_rows(count, length, severities, options)) == expected
