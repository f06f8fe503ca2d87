"""The import page: upload images and a captions file, then watch the import job."""

from django import forms
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from django_htmx.http import reselect, reswap, retarget

from annotation import selectors
from annotation.models import Caption, Study
from annotation.services.imports import COCO_FORMAT, CSV_FORMAT, import_request
from annotation.views.access import researcher_required


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


@require_http_methods(["GET", "POST"])
@researcher_required
def study_import(request: HttpRequest, study_id: int) -> HttpResponse:
    study = selectors.study_for_researcher(request.user, study_id)
    if study.status != Study.Status.DRAFT:
        message = "Images and captions can only be imported while the study is a draft."
        return render(
            request, "error.html", {"title": "Import closed", "message": message}, status=409
        )
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        job = import_request(study=study, user=request.user, **form.cleaned_data)
        if request.htmx:
            return render(request, "partials/job_status.html", {"job": job})
        return redirect("job_status", job_id=job.pk)
    context = {
        "study": study,
        "form": form,
        "max_megapixels": f"{settings.CAPEVAL_MAX_IMAGE_PIXELS / 1e6:g}",
    }
    response = render(request, "studies/import.html", context)
    if request.method == "POST":
        if not request.htmx:
            response.status_code = 400
        else:
            # htmx swaps 200 answers only: show the form with its errors in place.
            reselect(response, "#import-panel")
            retarget(response, "#import-panel")
            reswap(response, "outerHTML")
    return response
