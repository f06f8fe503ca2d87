"""Forms of the researcher pages."""

import json

from django import forms

from annotation.models import Caption, Study
from annotation.services.imports import COCO_FORMAT, CSV_FORMAT
from annotation.services.studies import MAX_SEED, SETTINGS_TOO_DEEP
from annotation.text import DESCRIPTION_MAX_CHARS, TextValidator


class StudyForm(forms.Form):
    # Django's own max_length checks the length; TextValidator the characters.
    name = forms.CharField(max_length=200, validators=[TextValidator("name")])
    mode = forms.ChoiceField(choices=Study.Mode.choices)
    description = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=DESCRIPTION_MAX_CHARS,
        validators=[TextValidator("description", multiline=True)],
    )
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


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files under one name (Django's FileField keeps only the last)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        files = [f for f in (data if isinstance(data, list | tuple) else [data]) if f]
        return [super(MultipleFileField, self).clean(f, initial) for f in files]


class ImportForm(forms.Form):
    """The import page: which files to import and how; the import service checks their content."""

    images_zip = forms.FileField(
        label="Images as a zip archive",
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ".zip,application/zip"}),
        help_text="JPEG, PNG or WebP files; folders inside the archive are ignored.",
    )
    image_files = MultipleFileField(
        label="Or image files",
        required=False,
        widget=MultipleFileInput(attrs={"accept": ".jpg,.jpeg,.png,.webp"}),
        help_text="Select several JPEG, PNG or WebP files.",
    )
    captions = forms.FileField(
        label="Captions file",
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,.json,text/csv,application/json"}),
        help_text=(
            "CSV with columns image, system, caption (optional prime_ratings like 3;4, "
            "metric:<name>, description, source); tutorial and probation sets: image, "
            "caption, truth, explanation. Or COCO results JSON, one system per file."
        ),
    )
    caption_format = forms.ChoiceField(
        label="Captions format",
        required=False,
        choices=[("", "By file extension"), (CSV_FORMAT, "CSV"), (COCO_FORMAT, "COCO JSON")],
    )
    system = forms.CharField(
        label="System name",
        required=False,
        max_length=100,
        validators=[TextValidator("system name")],
        help_text=(
            "COCO JSON: the system that wrote the captions (default: the file name without "
            "extension). CSV: only for a file without a system column."
        ),
    )
    coco_images = forms.FileField(
        label="COCO images list",
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ".json,application/json"}),
        help_text=(
            "COCO JSON with an images list mapping image_id to file_name, when the results "
            "file has none."
        ),
    )
    purpose = forms.ChoiceField(
        label="Purpose of these captions",
        choices=Caption.Purpose.choices,
        initial=Caption.Purpose.STUDY,
        help_text="Tutorial and probation sets are for VICR studies.",
    )

    def clean(self):
        data = super().clean()
        if not (data.get("images_zip") or data.get("image_files") or data.get("captions")):
            raise forms.ValidationError("Choose images, a captions file, or both.")
        names = [f.name for f in data.get("image_files") or []]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            self.add_error("image_files", f"Repeated file names: {', '.join(repeated)}.")
        return data
