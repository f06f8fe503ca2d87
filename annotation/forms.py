"""Forms of the researcher pages."""

import json
from typing import Any

from django import forms
from django.forms.utils import ErrorDict

from annotation.errors import ServiceError
from annotation.models import Caption, Study
from annotation.modes import get_mode
from annotation.modes import guidelines as task_guidelines
from annotation.modes.settings import JUDGED, live_settings, ordered_fields, owner_setting_names
from annotation.registry import caption_purpose_choices, mode_choices
from annotation.services.imports import COCO_FORMAT, CSV_FORMAT
from annotation.services.planning import study_plan
from annotation.services.studies import MAX_SEED, SETTINGS_TOO_DEEP
from annotation.text import DESCRIPTION_MAX_CHARS, TextValidator
from rubrics import planner

GUIDELINES_HELP = (
    "What participants read on the intro and one key away on every item page, and what the "
    "judge's default prompt holds. Markdown: headings, lists, emphasis, links (http, https, "
    "mailto); HTML and images are shown as text. Leave empty for the mode's own guidelines."
)


class GuidelinesForm(forms.Form):
    guidelines = forms.CharField(
        label="Guidelines (Markdown)",
        widget=forms.Textarea(attrs={"rows": 18}),
        required=False,
        max_length=task_guidelines.MAX_CHARS,
        validators=[TextValidator("guidelines", multiline=True)],
        help_text=GUIDELINES_HELP,
    )


class StudyForm(forms.Form):
    # Django's own max_length checks the length; TextValidator the characters.
    name = forms.CharField(max_length=200, validators=[TextValidator("name")])
    mode = forms.ChoiceField(choices=mode_choices)
    description = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=DESCRIPTION_MAX_CHARS,
        validators=[TextValidator("description", multiline=True)],
    )
    seed = forms.IntegerField(
        initial=0, min_value=0, max_value=MAX_SEED, help_text="Seed of every random choice."
    )
    guidelines = forms.CharField(
        label="Guidelines for participants (Markdown)",
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        max_length=task_guidelines.MAX_CHARS,
        validators=[TextValidator("guidelines", multiline=True)],
        help_text=GUIDELINES_HELP,
    )
    settings = forms.CharField(
        label="Advanced: settings as JSON",
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        initial="{}",
        help_text=(
            "Optional; keys given here replace the fields above (the same keys and bounds, "
            "as the API takes them). Leave {} to use the fields."
        ),
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


def setting_specs(mode: str) -> list[dict[str, Any]]:
    """Every setting of ``mode`` as a plain description: name, kind, label, group, doc,
    default and bounds, read from the typed declaration (``annotation.modes.settings``).

    The settings form and the API's list of modes are both built from this, so neither can
    list a setting, bound or default the validator does not have. The order is the form's
    (``settings.ordered_fields``): by group, the mode's own settings before the shared ones.
    """
    settings_class = get_mode(mode).settings_class
    crowd = owner_setting_names()
    live = live_settings(settings_class)
    specs = []
    for spec in ordered_fields(settings_class):
        meta = dict(spec.metadata)
        specs.append(
            {
                "name": spec.name,
                "kind": meta["kind"],
                # A setting declared without a label (a mode outside this repository) still
                # gets a readable one from its name.
                "label": meta.get("label") or spec.name.replace("_", " ").capitalize(),
                "group": meta.get("group") or JUDGED,
                "doc": meta.get("doc", ""),
                "default": spec.default,
                "low": meta.get("low"),
                "high": meta.get("high"),
                "optional": meta.get("optional", False),
                "open_ends": meta.get("open", False),
                "max_length": meta.get("max"),
                "crowd": spec.name in crowd,
                # Changeable once the study is open (crowd and report settings).
                "live": spec.name in live,
            }
        )
    return specs


def _bounds_text(spec: dict[str, Any]) -> str:
    """The bounds a person reads under a field: "From 100 to 10000; empty: every image."."""
    kind = spec["kind"]
    if kind == "whole":
        text = f"A whole number from {spec['low']} to {spec['high']}"
        return text + (" (or empty)." if spec["optional"] else ".")
    if kind == "number":
        word = "between" if spec["open_ends"] else "from"
        joiner = "and" if spec["open_ends"] else "to"
        return f"A number {word} {spec['low']:g} {joiner} {spec['high']:g}."
    if kind == "url":
        return "Empty, or an https:// address."
    if kind == "text":
        return f"At most {spec['max_length']} characters."
    return ""


def _form_field(spec: dict[str, Any]) -> forms.Field:
    """The Django field of one setting.

    The field only reads the typed value (a whole number, a number, a box, a line); the
    bounds are checked by ``settings.clean`` like the API's, so both give the same message.
    The bounds still go into the widget (min, max) and the help text, for the person.
    """
    help_text = " ".join(part for part in (spec["doc"], _bounds_text(spec)) if part)
    common = {"label": spec["label"], "help_text": help_text, "initial": spec["default"]}
    kind = spec["kind"]
    if kind == "whole":
        attrs = {"min": spec["low"], "max": spec["high"], "step": 1}
        return forms.IntegerField(
            required=not spec["optional"], widget=forms.NumberInput(attrs=attrs), **common
        )
    if kind == "number":
        attrs = {"min": spec["low"], "max": spec["high"], "step": "any"}
        return forms.FloatField(widget=forms.NumberInput(attrs=attrs), **common)
    if kind == "flag":
        return forms.BooleanField(required=False, **common)
    widget = forms.URLInput() if kind == "url" else forms.TextInput()
    return forms.CharField(required=False, strip=False, widget=widget, **common)


class SettingsForm(forms.Form):
    """One mode's settings as form fields, generated from its typed declaration.

    The fields are prefixed with the mode (``thumb-bootstrap_resamples``) so a page can hold
    one fieldset per mode. ``shown`` is a hidden marker: a POST without it never showed this
    fieldset (an older client, a script posting only the JSON box), so its settings are the
    defaults rather than "every box unticked".
    """

    shown = forms.BooleanField(required=False, initial=True, widget=forms.HiddenInput())

    def __init__(self, mode: str, *args, **kwargs):
        kwargs.setdefault("prefix", mode)
        super().__init__(*args, **kwargs)
        self.mode = mode
        self.specs = setting_specs(mode)
        for spec in self.specs:
            self.fields[spec["name"]] = _form_field(spec)
            self.fields[spec["name"]].crowd = spec["crowd"]
            self.fields[spec["name"]].live = spec["live"]

    def full_clean(self) -> None:
        """A fieldset that was not shown has nothing to check: its values are the defaults."""
        if self.is_bound and not self.submitted:
            self._errors = ErrorDict()
            self.cleaned_data = {}
            return
        super().full_clean()

    @property
    def mode_label(self) -> str:
        return get_mode(self.mode).label

    def changed_from_defaults(self) -> bool:
        """Whether a POST showed this fieldset with a value other than the defaults (a
        setting typed for a mode the researcher then switched away from)."""
        if not self.submitted:
            return False
        defaults = {spec["name"]: spec["default"] for spec in self.specs}
        return not self.is_valid() or self.values() != defaults

    @property
    def submitted(self) -> bool:
        """Whether the POST came from a page that showed this fieldset."""
        return self.is_bound and self.add_prefix("shown") in self.data

    def settings_fields(self):
        """The bound fields of the settings (not the hidden marker)."""
        return [self[spec["name"]] for spec in self.specs]

    def groups(self) -> list[tuple[str, list[forms.BoundField]]]:
        """The bound fields by group, in the form's order: one fieldset each in the template
        (issue 26, row 14: a long single column of code names was hard to scan)."""
        grouped: dict[str, list[forms.BoundField]] = {}
        for spec in self.specs:
            grouped.setdefault(spec["group"], []).append(self[spec["name"]])
        return list(grouped.items())

    def values(self) -> dict[str, Any]:
        """The typed values (call after ``is_valid``); {} when the fieldset was not shown."""
        if not self.submitted:
            return {}
        return {spec["name"]: self.cleaned_data[spec["name"]] for spec in self.specs}

    def show_error(
        self, exc: ServiceError, *, fallback: forms.Form, json_keys: frozenset[str] = frozenset()
    ) -> None:
        """Put a refusal of ``settings.clean`` under the setting it names; a setting typed
        in the JSON box (``json_keys``), or none, gets it under ``fallback``'s settings."""
        setting = (exc.details or {}).get("setting", "")
        if (
            self.submitted
            and setting in self.fields
            and setting != "shown"
            and setting not in json_keys
        ):
            self.add_error(setting, exc.message)
        else:
            fallback.add_error("settings" if "settings" in fallback.fields else None, exc.message)


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
            "CSV with columns image, system, caption (optional metric:<name>, description, "
            "source, and the columns of the study's mode listed below). Or COCO results "
            "JSON, one system per file."
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
        choices=caption_purpose_choices,
        initial=Caption.Purpose.STUDY,
        help_text="Study captions, or a set of the study's mode (listed below).",
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


# The planner (issue 15): one form reads the page (views/plan.py) and the API's query
# (apis.StudyPlanApi), so both refuse the same input with the same messages.
MAX_SIZES = 8
MAX_SIMULATIONS = 100
MAX_STUDY_SIZE = 5000


class PlanForm(forms.Form):
    """The planner's parameters; every field has a default, so an empty query is valid."""

    sizes = forms.CharField(
        required=False,
        max_length=100,
        label="Numbers of images (pairs for VICR)",
        help_text=f"Comma-separated, 2 to {MAX_STUDY_SIZE}, at most {MAX_SIZES} of them.",
    )
    judgments_per_item = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=20,
        label="Judgments per item",
        help_text="THumB: judgments per caption (2 stages); HUMANr: workers per comparison; "
        "VICR: ratings per pair (at least 3).",
    )
    price_per_judgment = forms.FloatField(
        required=False, min_value=0, max_value=1000, label="Price per judgment"
    )
    seconds_per_judgment = forms.FloatField(
        required=False,
        min_value=0,
        max_value=3600,
        label="Seconds per judgment",
        help_text="Empty: the median time of this study's judgments, if it has any.",
    )
    target_half_width = forms.FloatField(
        required=False,
        min_value=0.0001,
        max_value=100,
        label="Target half-width",
        help_text="The recommended size is the cheapest whose every interval is this narrow "
        "(and, THumB and HUMANr, whose power reaches 80%).",
    )
    simulations = forms.IntegerField(
        required=False,
        min_value=5,
        max_value=MAX_SIMULATIONS,
        label="Simulations per size",
    )
    mean = forms.FloatField(
        required=False,
        min_value=1,
        max_value=5,
        label="THumB: mean score of the better system",
    )
    difference = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Smallest difference that matters",
        help_text="THumB: between the two systems' scores; HUMANr: a model below the Human "
        "baseline, on the -1 to 1 scale.",
    )
    spread = forms.FloatField(
        required=False, min_value=0.1, max_value=10, label="HUMANr: slider spread (steps)"
    )
    exact = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="VICR: share of ratings at the true level",
    )
    adjacent = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="VICR: share of ratings one level off",
    )

    DEFAULTS: dict[str, Any] = {
        "sizes": "20, 50, 100, 200",
        "simulations": 30,
        "price_per_judgment": 0.10,
        "mean": 4.0,
        "difference": 0.3,
        "spread": 2.0,
        "exact": 0.6,
        "adjacent": 0.3,
    }

    def __init__(self, data=None, *, mode: str, **kwargs):
        self.mode = mode
        super().__init__(data, **kwargs)

    def clean_sizes(self) -> list[int]:
        text = self.cleaned_data.get("sizes") or self.DEFAULTS["sizes"]
        parts = [part.strip() for part in text.split(",") if part.strip()]
        if not parts or len(parts) > MAX_SIZES:
            raise forms.ValidationError(f"Give 1 to {MAX_SIZES} sizes, separated by commas.")
        sizes = []
        for part in parts:
            if not (part.isascii() and part.isdigit()) or not 2 <= int(part) <= MAX_STUDY_SIZE:
                raise forms.ValidationError(
                    f"{part!r} is not a whole number from 2 to {MAX_STUDY_SIZE}."
                )
            sizes.append(int(part))
        return sorted(set(sizes))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        for name, value in self.DEFAULTS.items():
            if name != "sizes" and data.get(name) is None and name not in self.errors:
                data[name] = value
        # Each mode's planner says its default and its least (modes/base.py:Planner).
        mode_planner = get_mode(self.mode).planner
        if data.get("judgments_per_item") is None and "judgments_per_item" not in self.errors:
            data["judgments_per_item"] = mode_planner.default_judgments
        judgments = data.get("judgments_per_item")
        if judgments is not None and judgments < mode_planner.min_judgments:
            self.add_error("judgments_per_item", mode_planner.min_judgments_reason)
        if (data.get("exact") or 0) + (data.get("adjacent") or 0) > 1:
            self.add_error("adjacent", "The two VICR shares together must not exceed 1.")
        if not self.errors:
            # The planner's CPU budget (rubrics.planner.check_budget), refused here so the
            # page shows it beside the simulations field instead of after the work started.
            try:
                planner.check_budget(
                    data["sizes"],
                    [data["judgments_per_item"]],
                    data["simulations"],
                    weight=mode_planner.budget_weight,
                )
            except ValueError as exc:
                self.add_error("simulations", str(exc))
        return data

    def plan(self, study: Study) -> dict[str, Any]:
        """The planner's JSON for the valid form (``study_plan``); ValueError if refused."""
        return study_plan(study, **self.cleaned_data)

    def error_dict(self) -> dict[str, list[str]]:
        """Errors by field name, as the API returns them."""
        return {field: [str(e) for e in errors] for field, errors in self.errors.items()}
