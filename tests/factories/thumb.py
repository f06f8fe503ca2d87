"""Builders for THumB tests: studies with captions made directly (not through the importer),
annotators, and helpers that lease and submit whole caption sets."""

import pytest

from annotation.models import Caption, Image
from annotation.modes.thumb.protocol import STAGE1, STAGE2
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.participants import participant_for_user
from annotation.services.studies import study_open
from rubrics import thumb as rubric

# image name -> [(system, raw caption text)]; "cat" has one text shared by two systems.
CAPTIONS = {
    "cat": [
        ("Human", "a black cat sleeping on a red suitcase"),
        ("Up-Down", "A cat laying in a suitcase ."),
        ("VinVL", "a cat laying in a suitcase"),
    ],
    "dog": [("Human", "A brown dog catching a frisbee."), ("Up-Down", "A dog in a park.")],
}


def add_image(study, name, captions, *, metrics=None):
    image = Image.objects.create(
        study=study,
        name=name,
        sha256=name.ljust(64, "0")[:64],
        file=f"originals/{name}.jpg",
        display=f"display/{name}.jpg",
        width=640,
        height=480,
        format="JPEG",
        alt_text=f"Photo {name}",
    )
    for line, (system, raw) in enumerate(captions, start=1):
        Caption.objects.create(
            study=study,
            image=image,
            system=system,
            raw_text=raw,
            text=rubric.normalise(raw),
            line=line,
            metrics=(metrics or {}).get(system, {}),
        )
    return image


def thumb_study(make_study, *, captions=CAPTIONS, settings=None, extra_images=0, seed=7):
    # Crowd tests not about pace post at once: no minimum time unless a test asks for one
    # (as the VICR factory does with seconds_before_submit).
    study = make_study("thumb", settings={"seconds_per_caption": 0, **(settings or {})}, seed=seed)
    for name, rows in captions.items():
        add_image(study, name, rows)
    for n in range(extra_images):
        add_image(
            study, f"extra{n}", [("Human", f"A scene number {n}."), ("Up-Down", f"A picture {n}.")]
        )
    study_open(study=study)
    return study


def member(study, user):
    study.annotators.add(user)
    return participant_for_user(study=study, user=user)


def scores(precision=4, recall=3, **extra):
    """One caption's answers; ``confirmed`` is the review's "I checked this caption" box
    (required in stage 2 and the check, ignored in stage 1)."""
    return {
        "precision": precision,
        "recall": recall,
        "fluency_errors": {},
        "conciseness": 0,
        "inclusive": 0,
        "confirmed": True,
        **extra,
    }


def all_scores(item, **per_field):
    return {"captions": {g["key"]: scores(**per_field) for g in item.spec["groups"]}}


def judge(participant, data_for, expected_kind=None):
    """Lease the next item to ``participant`` and submit ``data_for(item)`` for it."""
    lease = assignment_next(participant=participant)
    assert lease is not None, "the participant was given an item"
    if expected_kind:
        assert lease.item.kind == expected_kind
    return judgment_submit(
        participant=participant, token=lease.token, data=data_for(lease.item)
    ).judgment


def form_for(item, **per_field):
    """The POST body the item page sends for every caption group of ``item``."""
    body = {"part": "0"}
    for group in item.spec["groups"]:
        values = scores(**per_field)
        for field in ("precision", "recall", "conciseness", "inclusive"):
            if values.get(field) is not None:
                body[f"{group['key']}-{field}"] = str(values[field])
        if values.get("confirmed"):
            body[f"{group['key']}-confirm"] = "yes"
    return body


# Named explicitly so that a module may import it under another name (``make_annotator as
# make_annotator_fixture``) and still ask for ``make_annotator`` without shadowing the import.
@pytest.fixture(name="make_annotator")
def make_annotator(make_user):
    """``make_annotator(name, native=False)``: a registered annotator; ``native`` makes a
    native English speaker."""

    def make(name, native=False):
        return make_user(name, native_english=native)

    return make


def tiny_study(make_study, make_annotator):
    """Two images, Human and M1, both stages; hand-checkable numbers."""
    captions = {
        "one": [("Human", "A red bus on a street."), ("M1", "A bus.")],
        "two": [("Human", "Two dogs playing."), ("M1", "A dog playing.")],
    }
    study = make_study("thumb", settings={"weight_precision": 0.5, "weight_recall": 0.5})
    for name, rows in captions.items():
        add_image(study, name, rows, metrics={"Human": {"bleu": 0.9}, "M1": {"bleu": 0.2}})
    study_open(study=study)
    first = member(study, make_annotator("ann", native=True))
    second = member(study, make_annotator("bob", native=True))
    stage1 = {  # image -> text -> (P, R)
        "one": {"A red bus on a street.": (5, 5), "A bus.": (5, 2)},
        "two": {"Two dogs playing.": (5, 4), "A dog playing.": (3, 3)},
    }

    def payload(item, changes=None):
        values = dict(stage1[item.image.name])
        values.update(changes or {})
        return {"captions": {g["key"]: scores(*values[g["text"]]) for g in item.spec["groups"]}}

    for _ in range(2):
        judge(first, payload, STAGE1)
    # Stage 2 changes M1's recall on image "one" from 2 to 3; Human on "two" gets a penalty.
    judge(
        second,
        lambda item: (
            payload(item, {"A bus.": (5, 3)}) if item.image.name == "one" else payload(item)
        ),
        STAGE2,
    )
    judge(
        second,
        lambda item: {
            "captions": {
                **payload(item)["captions"],
                **{
                    g["key"]: scores(5, 4, conciseness="0.5")
                    for g in item.spec["groups"]
                    if g["text"] == "Two dogs playing."
                },
            }
        },
        STAGE2,
    )
    return study
