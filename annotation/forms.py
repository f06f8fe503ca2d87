"""Forms of the researcher pages."""

import json

from django import forms

from annotation.models import Study
from annotation.services.studies import MAX_SEED, SETTINGS_TOO_DEEP


class StudyForm(forms.Form):
    name = forms.CharField(max_length=200)
    mode = forms.ChoiceField(choices=Study.Mode.choices)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    seed = forms.IntegerField(
        initial=0, min_value=0, max_value=MAX_SEED, help_text="Seed of every random choice."
    )
    settings = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        initial="{}",
        help_text="Mode settings as JSON; leave {} for the protocol defaults.",
    )

    def clean_settings(self) -> dict:
        raw = self.cleaned_data["settings"].strip() or "{}"
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc.msg} (line {exc.lineno}).") from exc
        except RecursionError:
            # json parses recursively: thousands of nested brackets exhaust the stack.
            raise forms.ValidationError(f"Settings are {SETTINGS_TOO_DEEP}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("Settings must be a JSON object, like {}.")
        return value
