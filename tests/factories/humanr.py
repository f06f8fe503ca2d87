"""HUMANr builders for tests: a live study with images and captions, crowd workers, and
workers who answer whole groups honestly or carelessly."""

from __future__ import annotations

import random

from annotation.models import Caption, Image, Participant
from annotation.modes.humanr.protocol import CHECK, reference_on_left
from annotation.services.assignments import assignment_next
from annotation.services.judgments import judgment_submit
from annotation.services.participants import participant_for_crowd_worker
from annotation.services.studies import study_create, study_open


def add_images(study, *, images, humans, systems, missing_human=()):
    """Images with ``humans`` human captions and one caption per model system each."""
    for number in range(images):
        image = Image.objects.create(
            study=study,
            name=f"img{number:04d}.jpg",
            sha256=f"{number:064x}",
            file=f"o/{number}",
            display=f"d/{number}.jpg",
            width=40,
            height=30,
            format="JPEG",
            alt_text=f"Photo {number}",
        )
        count = 1 if number in missing_human else humans
        rows = [
            Caption(
                study=study,
                image=image,
                system=Caption.HUMAN,
                raw_text=f"h{k}",
                text=f"Human caption {k} of image {number}.",
                line=number * 10 + k,
            )
            for k in range(count)
        ]
        rows += [
            Caption(
                study=study,
                image=image,
                system=system,
                raw_text=system,
                text=f"{system} caption of image {number}.",
                line=number * 10 + 5 + k,
            )
            for k, system in enumerate(systems)
        ]
        Caption.objects.bulk_create(rows)


def humanr_study(
    owner, *, images=12, humans=3, systems=("GIT", "ClipCap"), seed=7, missing_human=(), **settings
):
    """A live HUMANr study; ``settings`` as a researcher types them (no minimum time unless
    given)."""
    settings.setdefault("min_seconds_per_trial", 0)
    study = study_create(
        owner=owner, name="HUMANr test", mode="humanr", settings=settings, seed=seed
    )
    add_images(study, images=images, humans=humans, systems=systems, missing_human=missing_human)
    study_open(study=study)
    return study


def crowd(study, pid="PID-1", source=Participant.Source.PROLIFIC, meta=None):
    """A crowd worker of the study (a Prolific one unless ``source`` says otherwise)."""
    participant, _ = participant_for_crowd_worker(
        study=study,
        source=source,
        external_id=pid,
        meta=meta
        if meta is not None
        else {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": "X"},
    )
    return participant


def honest(trial, on_left):
    """Prefers the reference (human / correct) caption strongly: passes every check."""
    return 2 if on_left else 8


def careless(trial, on_left):
    """Answers 'both equally' everywhere: fails every attention check."""
    return 5


def honest_on_page(context) -> int:
    """What an honest worker answers on a trial page, from what the page shows: strongly
    the caption of the image shown when only one of the two is its caption (an attention
    check), and 3 (caption A, mildly) on a comparison, where either answer is honest."""
    image_id = context["image"].pk
    left, right = context["left_caption"].image_id, context["right_caption"].image_id
    if left == image_id != right:
        return 2
    if right == image_id != left:
        return 8
    return 3


def do_group(participant, answer=honest, *, parts=None):
    """Lease the next group and answer ``parts`` trials (all by default); return the lease."""
    lease = assignment_next(participant=participant)
    assert lease is not None
    spec = lease.item.spec
    for part in range(parts if parts is not None else len(spec["trials"])):
        on_left = reference_on_left(spec["seed"], lease.pk, part)
        judgment_submit(
            participant=participant,
            token=lease.token,
            part=part,
            data={"raw": answer(spec["trials"][part], on_left)},
        )
    return lease


def answer_every_group(study, means: dict[str, float], *, seed: int) -> None:
    """Fresh crowd workers answer one whole group each until nothing is left (a fresh worker
    has met no image, so only a full study serves them nothing). Checks are passed; a
    comparison of ``system`` gets the oriented answer ``5 + 4 * means[system]`` plus one
    slider step of normal noise, rounded and kept on the slider."""
    rng = random.Random(seed)

    def answer(trial, on_left):
        if trial["kind"] == CHECK:
            return honest(trial, on_left)
        oriented = min(9, max(1, round(5 + 4 * means[trial["system"]] + rng.gauss(0, 1))))
        return oriented if on_left else 10 - oriented

    for number in range(1000):
        worker = crowd(study, f"PID-{number}")
        if assignment_next(participant=worker) is None:
            return
        do_group(worker, answer)  # the same lease, served again
    raise AssertionError("the study was not answered by 1,000 workers")
