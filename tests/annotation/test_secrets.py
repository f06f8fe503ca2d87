"""annotation.secrets: Fernet tokens for stored credentials, key rotation, refusals."""

import base64

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from annotation import secrets

PLAIN = "sk-proj-Zq8v3LmN0pQrStUvWxYz1234"


@pytest.fixture
def keys(monkeypatch):
    """Set CAPEVAL_SECRET_KEYS to the given keys (newest first)."""

    def use(*ks: bytes):
        monkeypatch.setenv(secrets.ENV_VAR, ",".join(k.decode() for k in ks))

    return use


def test_round_trip_and_plain_text_absent_from_token(keys):
    keys(Fernet.generate_key())
    token = secrets.encrypt(PLAIN)
    assert secrets.decrypt(token) == PLAIN
    assert PLAIN not in token
    # Nor hidden in the token's base64 payload: Fernet's body is ciphertext, not an encoding.
    assert PLAIN.encode() not in base64.urlsafe_b64decode(token)
    assert "1234" not in base64.urlsafe_b64decode(token).decode("latin-1")
    # Fresh IV each time: the same text never gives the same token (no equality leak).
    assert secrets.encrypt(PLAIN) != token


def test_rotation_reads_old_tokens_and_rewrites_them_with_the_new_key(keys):
    old, new = Fernet.generate_key(), Fernet.generate_key()
    keys(old)
    token = secrets.encrypt(PLAIN)
    keys(new, old)
    assert secrets.decrypt(token) == PLAIN
    rotated = secrets.rotate(token)
    keys(new)  # old key dropped: only rotated tokens still read
    assert secrets.decrypt(rotated) == PLAIN
    with pytest.raises(secrets.SecretError):
        secrets.decrypt(token)


def test_wrong_key_refused_without_quoting_anything(keys):
    first, other = Fernet.generate_key(), Fernet.generate_key()
    keys(first)
    token = secrets.encrypt(PLAIN)
    keys(other)
    with pytest.raises(secrets.SecretError) as info:
        secrets.decrypt(token)
    message = str(info.value)
    assert "CAPEVAL_SECRET_KEYS" in message
    for leak in (token, PLAIN, other.decode(), first.decode()):
        assert leak not in message


def test_tampered_or_garbage_token_refused(keys):
    keys(Fernet.generate_key())
    token = secrets.encrypt(PLAIN)
    tampered = token[:-6] + ("A" if token[-6] != "A" else "B") + token[-5:]
    for bad in (tampered, "not a token", "", "é"):
        with pytest.raises(secrets.SecretError):
            secrets.decrypt(bad)


def test_malformed_key_is_a_clear_error_that_does_not_quote_it(monkeypatch):
    monkeypatch.setenv(secrets.ENV_VAR, f"{Fernet.generate_key().decode()},hunter2-not-a-key")
    with pytest.raises(ImproperlyConfigured, match="key 2 of 2") as info:
        secrets.encrypt(PLAIN)
    assert "hunter2" not in str(info.value)


def test_production_without_keys_fails_clearly(monkeypatch, settings):
    monkeypatch.delenv(secrets.ENV_VAR, raising=False)
    settings.SETTINGS_MODULE = "capeval.settings.production"
    with pytest.raises(ImproperlyConfigured, match="CAPEVAL_SECRET_KEYS must be set"):
        secrets.encrypt(PLAIN)


def test_development_derives_a_key_from_secret_key(monkeypatch, settings):
    monkeypatch.delenv(secrets.ENV_VAR, raising=False)
    settings.SECRET_KEY = "dev-placeholder-one"
    token = secrets.encrypt(PLAIN)
    assert secrets.decrypt(token) == PLAIN
    # The key is derived, not SECRET_KEY itself, and another SECRET_KEY cannot read it.
    settings.SECRET_KEY = "dev-placeholder-two"
    with pytest.raises(secrets.SecretError):
        secrets.decrypt(token)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("sk-proj-Zq8v3LmN0pQrStUvWxYz1234", "sk-...1234"),
        ("abcdefghijklmnopqrstuvwxyz", "...wxyz"),
        ("short-key", "..."),
        ("", ""),
    ],
)
def test_masked(text, shown):
    assert secrets.masked(text) == shown
