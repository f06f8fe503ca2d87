"""Encryption of stored credentials (judge endpoint keys now; Prolific and MTurk later).

A credential the platform must send on the researcher's behalf (an API key for a judge's
chat-completions endpoint) has to be stored, but never in plain text: a database dump, a
backup or a dataset export must not hand it out. :func:`encrypt` turns it into a Fernet
token (AES-128-CBC with an HMAC-SHA256, from the maintained ``cryptography`` package) and
:func:`decrypt` turns it back when the platform is about to send it. :func:`masked` gives
the short form a page may show ("sk-...abcd"); pages never show the rest.

Keys come from the environment, ``CAPEVAL_SECRET_KEYS``: one or more Fernet keys
(``cryptography.fernet.Fernet.generate_key()``), comma-separated, newest first. Every
token is made with the first key; any listed key can read one (``MultiFernet``). To
rotate: put a new key first, keep the old ones after it until every stored token has been
re-encrypted (:func:`rotate`), then drop them.

Without ``CAPEVAL_SECRET_KEYS``:

- in production (``capeval.settings.production``) every call fails with
  ``ImproperlyConfigured``: a silently derived key would tie the stored credentials to
  ``SECRET_KEY``, whose rotation (for sessions) would then make them unreadable;
- in development and tests a key is derived from Django's ``SECRET_KEY`` (HKDF-SHA256,
  its own ``info`` label so it is not the key Django signs cookies with). That is safe
  enough there: the development ``SECRET_KEY`` is a public placeholder, so the tokens
  protect nothing from a reader of this repository, but a development database holds only
  throwaway keys, and the same code path runs, so nothing ever lands in plain text by
  accident.

Error messages never quote a key, a token or the plain text.
"""

import base64
import os

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

__all__ = ["SecretError", "ENV_VAR", "encrypt", "decrypt", "rotate", "masked"]

ENV_VAR = "CAPEVAL_SECRET_KEYS"
_PRODUCTION_SETTINGS = "capeval.settings.production"
# A label for HKDF so the derived key differs from anything else made from SECRET_KEY.
_HKDF_INFO = b"capeval.annotation.secrets v1"


class SecretError(ValueError):
    """A token that cannot be read with any configured key (or is not a token at all)."""


def _env_keys() -> list[str]:
    raw = os.environ.get(ENV_VAR, "")
    return [part.strip() for part in raw.split(",") if part.strip()]


def _derived_key() -> bytes:
    secret = str(settings.SECRET_KEY).encode("utf-8")
    if not secret:
        raise ImproperlyConfigured(f"{ENV_VAR} is unset and Django's SECRET_KEY is empty.")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO)
    return base64.urlsafe_b64encode(hkdf.derive(secret))


def _fernet() -> MultiFernet:
    keys = _env_keys()
    if not keys:
        if getattr(settings, "SETTINGS_MODULE", "") == _PRODUCTION_SETTINGS:
            raise ImproperlyConfigured(
                f"{ENV_VAR} must be set in production: one or more Fernet keys, "
                "comma-separated, newest first (Fernet.generate_key())."
            )
        return MultiFernet([Fernet(_derived_key())])
    fernets = []
    for position, key in enumerate(keys, start=1):
        try:
            fernets.append(Fernet(key))
        except (ValueError, TypeError):
            # The key itself is never quoted: the message may reach a log.
            raise ImproperlyConfigured(
                f"{ENV_VAR}: key {position} of {len(keys)} is not a Fernet key "
                "(32 url-safe base64-encoded bytes, as Fernet.generate_key() makes)."
            ) from None
    return MultiFernet(fernets)


def encrypt(text: str) -> str:
    """Encrypt ``text`` with the first configured key; return the token as ASCII text."""
    if not isinstance(text, str):
        raise TypeError("encrypt() takes a str")
    return _fernet().encrypt(text.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    """The plain text of a token made by :func:`encrypt` with any configured key.

    Raises :class:`SecretError` when no configured key made it (a wrong or dropped key,
    or a tampered token).
    """
    if not isinstance(token, str):
        raise TypeError("decrypt() takes a str")
    try:
        return _fernet().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeEncodeError):
        raise SecretError(
            f"a stored credential cannot be decrypted with the keys in {ENV_VAR} "
            "(was its key removed?); enter the credential again"
        ) from None


def rotate(token: str) -> str:
    """Re-encrypt ``token`` with the first configured key (after a key was added in front)."""
    try:
        return _fernet().rotate(token.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeEncodeError):
        raise SecretError(
            f"a stored credential cannot be decrypted with the keys in {ENV_VAR}"
        ) from None


def masked(text: str, *, shown: int = 4) -> str:
    """A form of ``text`` safe to show: its prefix up to the first dash and its last characters.

    ``masked("sk-proj-abcdefgh1234")`` is ``"sk-...1234"``. Short texts (at most
    ``3 * shown`` characters) show only dots: their last characters would be most of them.
    """
    if not text:
        return ""
    if len(text) <= 3 * shown:
        return "..."
    head, dash, _rest = text.partition("-")
    prefix = head + dash if dash and len(head) <= shown else ""
    return f"{prefix}...{text[-shown:]}"
