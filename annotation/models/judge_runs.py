"""What a judge run through the platform needs beside ``Judge`` and ``JudgeAnswer``
(issue 25, "Run"): the researcher's endpoint settings, versioned prompt templates, the
reply cache that makes a rerun free, and the items a run could not answer.

The API key is stored only as a Fernet token (``annotation/secrets.py``) with its masked
form for display; no column holds it in plain text, and nothing here is exported.
"""

from django.conf import settings as django_settings
from django.db import models

from annotation.models import Caption, Item, Job, Study


class JudgeEndpoint(models.Model):
    """A study's judge endpoint: an OpenAI-compatible chat-completions server and how to
    call it (``annotation.judges.client.run_batch``'s options). One per study."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="judge_endpoint")
    name = models.CharField(max_length=100, help_text="The judge's name in the report.")
    base_url = models.CharField(max_length=500, help_text="Ends with /v1.")
    model = models.CharField(max_length=200)
    api_key_token = models.TextField(blank=True, help_text="Fernet token of the key, or empty.")
    api_key_masked = models.CharField(max_length=40, blank=True, help_text="What pages show.")
    # Who may spend the key: the researcher who saved it (``judge_endpoints.check_key_spender``).
    api_key_saved_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Who saved the key; only they may spend it (empty: no researcher may).",
    )
    concurrency = models.PositiveSmallIntegerField(default=16)
    timeout = models.FloatField(default=60.0, help_text="Seconds per attempt.")
    max_retries = models.PositiveSmallIntegerField(default=4)
    temperature = models.FloatField(default=0.0)
    repeats = models.PositiveSmallIntegerField(default=1, help_text="Runs of each question.")
    swap = models.BooleanField(default=False, help_text="Ask each pair both ways.")
    price_prompt_per_1k = models.FloatField(default=0.0)
    price_completion_per_1k = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name} at {self.base_url} ({self.model})"


class JudgePrompt(models.Model):
    """One version of the study's prompt template; saving an edit makes a new version, so
    every stored answer names the exact text it was asked with."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judge_prompts")
    version = models.PositiveIntegerField()
    text = models.TextField()
    # The version of the study's guidelines the text holds ("": none of them), issue 46.
    guidelines_version = models.CharField(max_length=16, blank=True)
    created_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-version"]
        constraints = [
            models.UniqueConstraint(fields=["study", "version"], name="judge_prompt_version_unique")
        ]

    def __str__(self) -> str:
        return f"prompt {self.label} of study {self.study_id}"

    @property
    def label(self) -> str:
        return f"v{self.version}"


class JudgeCacheEntry(models.Model):
    """A reply that passed the mode's validation, keyed as ``client.cache_key`` keys it
    (prompt version, model, item key, image SHA-256): a rerun reads it instead of asking."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    prompt_version = models.CharField(max_length=50)
    model = models.CharField(max_length=200)
    item_key = models.CharField(max_length=100)
    image_hash = models.CharField(max_length=64)
    raw_reply = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["study", "prompt_version", "model", "item_key", "image_hash"],
                name="judge_cache_key_unique",
            )
        ]

    def __str__(self) -> str:
        return f"cached reply {self.item_key} ({self.prompt_version}, {self.model})"


class JudgeFailure(models.Model):
    """A question a run asked and got no usable answer to, with why and the raw reply."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="judge_failures")
    item = models.ForeignKey(Item, on_delete=models.SET_NULL, null=True, blank=True)
    caption = models.ForeignKey(Caption, on_delete=models.CASCADE, related_name="+")
    caption_b = models.ForeignKey(
        Caption, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    run = models.PositiveSmallIntegerField(default=0)
    error = models.TextField()
    raw_reply = models.TextField(blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"failure of job {self.job_id} on caption {self.caption_id}"
