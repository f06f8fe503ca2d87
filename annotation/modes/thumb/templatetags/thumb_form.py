"""The item page's tags (issue 48): its caption groups and its rubric dialog, markup the
template engine was slow to build (``form.py`` says why)."""

from __future__ import annotations

import functools

from django import template
from django.conf import settings
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from annotation.modes.thumb.form import caption_groups_html
from annotation.modes.thumb.pages import rubric_context

register = template.Library()


@register.simple_tag(takes_context=True)
def caption_groups(context) -> SafeString:
    """The page's caption groups (``groups``, ``kind`` and ``reviewed_label`` of the mode's
    context), with a refused submission's problems (``field_errors``, the view's)."""
    return mark_safe(
        caption_groups_html(
            context["groups"],
            kind=context["kind"],
            reviewed_label=context["reviewed_label"],
            field_errors=context.get("field_errors") or (),
        )
    )


@register.simple_tag
def rubric_dialog() -> SafeString:
    """``modes/thumb/rubric.html``: the same on every page, so rendered once per process
    (each time while ``DEBUG`` is on, so an edited template shows at once)."""
    if settings.DEBUG:
        return _rubric()
    return _cached_rubric()


def _rubric() -> SafeString:
    return mark_safe(render_to_string("modes/thumb/rubric.html", rubric_context()))


@functools.cache
def _cached_rubric() -> SafeString:
    return _rubric()
