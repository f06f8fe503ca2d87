"""A researcher's crowd credentials: stored encrypted (``annotation/secrets.py``), decrypted
only to build a client, never returned to a page, an export or a log."""

from django.conf import settings
from django.db import transaction

from annotation import secrets
from annotation.crowd.mturk import MTurkClient
from annotation.crowd.prolific import ProlificClient
from annotation.errors import InvalidInput
from annotation.models import CrowdCredential, Study, User

#: The encrypted fields a researcher may set; an empty value keeps what is stored.
SECRET_FIELDS = (
    "prolific_token",
    "prolific_webhook_secret",
    "mturk_access_key_id",
    "mturk_secret_access_key",
)
MAX_SECRET_CHARS = 500


def credential_save(
    *, user: User, values: dict[str, str], mturk_sandbox: bool, clear: tuple[str, ...] = ()
) -> CrowdCredential:
    """Store the given credentials encrypted; blank values keep the stored ones.

    ``clear`` names fields to forget. Nothing is written when a value is refused.
    """
    unknown = set(values) - set(SECRET_FIELDS) or set(clear) - set(SECRET_FIELDS)
    if unknown:
        raise InvalidInput(f"unknown credential: {', '.join(sorted(unknown))}")
    cleaned = {}
    for name, value in values.items():
        value = (value or "").strip()
        if len(value) > MAX_SECRET_CHARS or any(ch.isspace() for ch in value):
            # The value itself is never quoted: the message may be logged or shown.
            raise InvalidInput(
                f"{name.replace('_', ' ')}: at most {MAX_SECRET_CHARS} characters, no spaces",
                field=name,
            )
        if value:
            cleaned[name] = secrets.encrypt(value)
    with transaction.atomic():
        credential, _ = CrowdCredential.objects.select_for_update().get_or_create(user=user)
        for name in clear:
            setattr(credential, name, "")
        for name, token in cleaned.items():
            setattr(credential, name, token)
        credential.mturk_sandbox = mturk_sandbox
        credential.save()
    return credential


def credential_status(user: User) -> dict[str, bool]:
    """Which credentials are stored (True/False): all a page may know of them."""
    credential = CrowdCredential.objects.filter(user=user).first()
    status = {name: bool(credential and getattr(credential, name)) for name in SECRET_FIELDS}
    status["mturk_sandbox"] = credential.mturk_sandbox if credential else True
    return status


#: What each platform's client needs, in the words the pages use.
NEEDED = {
    "prolific": (("prolific_token", "Prolific API token"),),
    "mturk": (
        ("mturk_access_key_id", "MTurk access key id"),
        ("mturk_secret_access_key", "MTurk secret access key"),
    ),
}


def credentials_missing(study: Study, sources) -> list[str]:
    """What the study's owner has not stored that paying workers of ``sources`` needs
    (``"Prolific API token"``...): said at the review, before anything is confirmed."""
    status = credential_status(study.owner)
    return [
        words
        for source in sorted(set(sources))
        for name, words in NEEDED.get(source, ())
        if not status[name]
    ]


def _plain(credential: CrowdCredential | None, name: str, what: str) -> str:
    token = getattr(credential, name, "") if credential else ""
    if not token:
        raise InvalidInput(
            f"The study's owner has not stored {what} (Account, crowd credentials).",
            field=name,
        )
    try:
        return secrets.decrypt(token)
    except secrets.SecretError as exc:
        raise InvalidInput(str(exc), field=name) from None


def prolific_client(study: Study) -> ProlificClient:
    """A Prolific client with the study owner's token (the owner pays the workers)."""
    credential = CrowdCredential.objects.filter(user_id=study.owner_id).first()
    return ProlificClient(
        token=_plain(credential, "prolific_token", "a Prolific API token"),
        base_url=settings.CAPEVAL_PROLIFIC_API_URL,
        timeout=settings.CAPEVAL_CROWD_TIMEOUT,
    )


def mturk_client(study: Study) -> MTurkClient:
    """An MTurk client with the study owner's key pair, on the sandbox or live endpoint."""
    credential = CrowdCredential.objects.filter(user_id=study.owner_id).first()
    key_id = _plain(credential, "mturk_access_key_id", "an MTurk access key id")
    secret = _plain(credential, "mturk_secret_access_key", "an MTurk secret access key")
    endpoint = (
        settings.CAPEVAL_MTURK_SANDBOX_ENDPOINT
        if credential.mturk_sandbox
        else settings.CAPEVAL_MTURK_ENDPOINT
    )
    return MTurkClient(
        key_id=key_id, secret=secret, endpoint=endpoint, timeout=settings.CAPEVAL_CROWD_TIMEOUT
    )


def webhook_secrets(studies: list[Study]) -> dict[int, list[str]]:
    """The Prolific webhook secrets of these studies' owners, by owner id.

    By owner, because a signature only vouches for the studies of the researcher whose
    secret made it: another researcher may link a study of theirs to the same Prolific id.
    """
    found: dict[int, list[str]] = {}
    for credential in CrowdCredential.objects.filter(
        user_id__in={study.owner_id for study in studies}
    ).exclude(prolific_webhook_secret=""):
        try:
            found.setdefault(credential.user_id, []).append(
                secrets.decrypt(credential.prolific_webhook_secret)
            )
        except secrets.SecretError:
            continue
    return found
