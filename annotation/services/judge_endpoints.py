"""A study's judge endpoint: where the judge is asked, how, and whose API key pays (issue 25).

``judge_endpoint_save`` validates and stores the settings (base URL, model, API key,
concurrency, timeout, retries, temperature, repeats, position swap, prices);
``check_key_spender`` is asked before a run spends a stored key. The key is stored only as
a Fernet token (``annotation/secrets.py``) plus its masked form, and is bound to the
researcher who saved it, the address it was entered for, and the settings and prompt that
saver saved (``judge_endpoint_save`` and ``judge_key_drop_unless_saver`` say why). The
base URL may not name an address inside the server's network unless the deployment lists
it (``judge_address_policy``); runs check every address again when they connect.
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from annotation import secrets
from annotation.errors import Forbidden, InvalidInput
from annotation.judges.client import Endpoint
from annotation.judges.network import AddressPolicy, url_refusal
from annotation.models import JudgeEndpoint, Study, User
from annotation.text import clean_text

MAX_KEY = 500

#: Each numeric setting: (default, lowest, highest, whole number?). Every bound is finite:
#: a setting is work the server does on the researcher's behalf.
NUMBERS: dict[str, tuple[float, float, float, bool]] = {
    "concurrency": (16, 1, 64, True),  # requests in flight; 64 saturates a large vLLM server
    "timeout": (60.0, 0.5, 600.0, False),  # seconds per attempt; a slow VLM takes ~30 s
    "max_retries": (4, 0, 10, True),  # retries of 429 / 5xx / timeouts
    "temperature": (0.0, 0.0, 2.0, False),  # the chat-completions API's own range
    "repeats": (1, 1, 10, True),  # runs of each question (self-consistency)
    "price_prompt_per_1k": (0.0, 0.0, 1000.0, False),
    "price_completion_per_1k": (0.0, 0.0, 1000.0, False),
}


def _number(raw: Any, name: str) -> float | int:
    default, low, high, whole = NUMBERS[name]
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or not low <= value <= high or (whole and value != int(value)):
        kind = "a whole number" if whole else "a number"
        raise InvalidInput(f"{name}: give {kind} from {low:g} to {high:g}.", field=name)
    return int(value) if whole else value


def judge_address_policy() -> AddressPolicy:
    """Where judge runs may connect: public addresses and ``CAPEVAL_JUDGE_ALLOWED_HOSTS``
    (``annotation/judges/network.py``). A malformed entry is the deployment's error."""
    try:
        return AddressPolicy.parse(settings.CAPEVAL_JUDGE_ALLOWED_HOSTS)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def judge_endpoint_view(study: Study) -> dict[str, Any] | None:
    """The saved settings as pages and the API show them: the key only masked."""
    row = JudgeEndpoint.objects.filter(study=study).first()
    if row is None:
        return None
    return {
        "name": row.name,
        "base_url": row.base_url,
        "model": row.model,
        "api_key": row.api_key_masked,
        "has_key": bool(row.api_key_token),
        "key_saved_by": _saver_name(row),
        "swap": row.swap,
        **{name: getattr(row, name) for name in NUMBERS},
    }


def judge_endpoint_save(
    *,
    study: Study,
    name: str,
    base_url: str,
    model: str,
    api_key: str = "",
    clear_key: bool = False,
    swap: bool = False,
    by: User | None = None,
    **numbers: Any,
) -> JudgeEndpoint:
    """Save the study's judge endpoint; an empty ``api_key`` keeps the stored one for the
    same ``base_url`` (``clear_key`` removes it). The key is stored encrypted, with ``by``
    as the one researcher who may spend it (``check_key_spender``); InvalidInput names
    the field.

    A stored key is bound to the address it was entered for: a new ``base_url`` without a
    new key drops it. Otherwise anyone who may edit the settings (a researcher the study
    is shared with) could point the endpoint at their own server, run the judge and
    receive the owner's key in the ``Authorization`` header.

    It is also bound to the settings its saver saved: when anyone else changes one of them
    (all but the name), the key is dropped. Otherwise that researcher could raise the
    repeats, pick a dearer model or zero the prices a run's cost is reported with, and the
    saver's next run would spend on settings they never chose."""
    unknown = set(numbers) - set(NUMBERS)
    if unknown:
        raise InvalidInput(f"Unknown setting(s): {', '.join(sorted(unknown))}.")
    name = clean_text((name or "").strip(), field="name", max_length=100)
    if not name:
        raise InvalidInput("name: give the judge a name.", field="name")
    base_url = clean_text((base_url or "").strip(), field="base_url", max_length=500)
    model = clean_text((model or "").strip(), field="model", max_length=200)
    if not model:
        raise InvalidInput("model: name the model the endpoint serves.", field="model")
    try:
        Endpoint(base_url, model)
    except ValueError:
        raise InvalidInput(
            "base_url: give the endpoint's address, http:// or https://, ending in /v1.",
            field="base_url",
        ) from None
    refusal = url_refusal(base_url, judge_address_policy())
    if refusal:
        raise InvalidInput(f"base_url: {refusal}.", field="base_url")
    api_key = (api_key or "").strip()
    if api_key and (
        len(api_key) > MAX_KEY or any(c.isspace() or not c.isprintable() for c in api_key)
    ):
        # The key is never quoted back: the message may reach a page or a log.
        raise InvalidInput(
            f"api_key: at most {MAX_KEY} printable characters, no spaces.", field="api_key"
        )
    values = {key: _number(numbers.get(key), key) for key in NUMBERS}
    with transaction.atomic():
        row = JudgeEndpoint.objects.select_for_update().filter(study=study).first()
        row = row or JudgeEndpoint(study=study)
        if row.base_url != base_url and not api_key:
            clear_key = True  # the key goes only where it was entered for (docstring)
        paid_for = {"model": model, "swap": bool(swap), **values}
        changed = any(getattr(row, key) != value for key, value in paid_for.items())
        if changed and row.api_key_saved_by_id != getattr(by, "pk", None) and not api_key:
            clear_key = True  # a key pays only for its saver's settings (docstring)
        row.name, row.base_url, row.model, row.swap = name, base_url, model, bool(swap)
        for key, value in values.items():
            setattr(row, key, value)
        if api_key:
            row.api_key_token = secrets.encrypt(api_key)
            row.api_key_masked = secrets.masked(api_key)
            row.api_key_saved_by = by
        elif clear_key:
            row.api_key_token = row.api_key_masked = ""
            row.api_key_saved_by = None
        row.save()
    return row


def judge_key_drop_unless_saver(*, study: Study, by: User | None) -> None:
    """Drop the study's stored key unless ``by`` saved it, inside the caller's transaction.

    Called when ``by`` changes what a run costs outside the settings: a new prompt version
    (a longer prompt is paid on every question). Like a new model or more repeats in
    ``judge_endpoint_save``, another researcher's prompt is not run on the saver's key;
    the saver enters it again once they have read the prompt."""
    JudgeEndpoint.objects.filter(study=study).exclude(api_key_token="").exclude(
        api_key_saved_by=by
    ).update(api_key_token="", api_key_masked="", api_key_saved_by=None)


def _saver_name(row: JudgeEndpoint) -> str:
    saver = row.api_key_saved_by if row.api_key_token else None
    return saver.get_username() if saver else ""


def check_key_spender(endpoint: JudgeEndpoint, user: User | None) -> None:
    """Refuse a run on a stored key by anyone but the researcher who saved it (Forbidden).

    Sharing a study lets another researcher manage it, not spend money its owner pays: a
    rival could run the judge again and again, each time with a new prompt version so
    that the cache answers nothing. So a key is spent only by whoever saved it; the others
    may save their own key (which replaces it) and run on that. An endpoint with no key
    (a local server) is anyone's. ``user`` None is the server itself (a command); a key
    saved with no user (``by`` None) is no researcher's to spend.
    """
    if not endpoint.api_key_token or user is None:
        return
    if endpoint.api_key_saved_by_id != user.pk:
        saver = _saver_name(endpoint) or "a command on the server"
        raise Forbidden(
            f"The judge's API key was saved by {saver}, and only they may spend it. Save "
            "your own key in the endpoint settings to run the judge on it.",
            field="api_key",
        )
