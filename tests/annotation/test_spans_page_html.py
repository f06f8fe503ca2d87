"""The error-span page's caption and option lists, built in Python since issue 48, give the
HTML the template loops they replace gave: the page's script selects words by these spans'
code-point offsets, so a changed byte would move a mark."""

from django.template import engines
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.modes.spans.pages import _options, caption_html, words

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
