"""THumB's own data about people: which registered annotators are native English speakers."""

from django.conf import settings as django_settings
from django.db import models


class Rater(models.Model):
    """A registered annotator as THumB sees them.

    Only THumB's fluency rule asks whether someone is a native English speaker (an image no
    native speaker judged gets a fluency-only round, served to native speakers only), so the
    answer lives with the mode and not on the shared ``User``. An account without a row is
    not a native speaker: rows exist for the annotators someone marked.
    """

    user = models.OneToOneField(
        django_settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="thumb_rater",
        help_text="The registered annotator.",
    )
    native_english = models.BooleanField(
        default=False, help_text="Native English speaker (THumB's fluency rule)."
    )

    class Meta:
        verbose_name = "THumB rater"

    def __str__(self) -> str:
        return f"{self.user} ({'native' if self.native_english else 'not native'} English)"
