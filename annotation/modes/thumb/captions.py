"""Which imported captions a THumB study does not judge, said in plain words (issue 26, row 18).

THumB judges one caption per system and image, the first imported (``build_items``): a
second Human caption on an image is kept, and useful as a reference in the metric lab, but
nobody scores it. An import that brings such captions must say so, not leave the researcher
to find 8 Human captions in the report and 16 on the metrics page.
"""

from __future__ import annotations

from collections import Counter

from django.db.models import Count

from annotation.models import Caption, Study


def unjudged_caption_notes(study: Study) -> list[str]:
    """One sentence per system with more than one study caption on an image."""
    repeated = (
        Caption.objects.filter(study=study, purpose=Caption.Purpose.STUDY)
        .values("image_id", "system")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .values_list("system", "n")
    )
    captions, images = Counter(), Counter()
    for system, n in repeated:
        captions[system] += n - 1
        images[system] += 1
    return [
        f"{captions[system]} {system} caption(s) on {images[system]} image(s) are not judged: "
        "THumB judges one caption per system and image, the first imported. They are kept, "
        "and can serve as references in the metric lab."
        for system in sorted(captions)
    ]
