"""Typed study settings, declared once per mode and checked by one validator.

A mode's settings are a frozen dataclass whose fields are made with the helpers below
(``whole``, ``number``, ``flag``, ``text``, ``https_url``); each helper records the
default and the bounds, so the declaration is the whole specification::

    @dataclass(frozen=True)
    class ThumbSettings(CrowdSettings):
        n_images: int | None = whole(None, low=1, optional=True)
        stage2: bool = flag(True)

``clean(ThumbSettings, raw)`` checks what a researcher typed and returns the JSON the study
stores; ``load(ThumbSettings, stored)`` turns stored JSON back into the dataclass. A check
across fields is a ``check(self)`` method on the dataclass that raises ``ServiceError``.
Every mode's settings extend ``CrowdSettings``, the settings of crowd arrivals.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from annotation.errors import ServiceError

S = TypeVar("S")


#: The top of a whole-number setting declared without one (a database integer's limit).
UNBOUNDED = 2**31 - 1


def whole(default: int | None, *, low: int, high: int = UNBOUNDED, optional=False, doc=""):
    """A whole number from ``low`` to ``high`` (``optional``: also ``None``)."""
    return field(
        default=default,
        metadata={"kind": "whole", "low": low, "high": high, "optional": optional, "doc": doc},
    )


def number(default: float, *, low: float, high: float, open_ends=False, doc=""):
    """Any real number from ``low`` to ``high`` (``open_ends``: strictly between them)."""
    return field(
        default=default,
        metadata={"kind": "number", "low": low, "high": high, "open": open_ends, "doc": doc},
    )


def flag(default: bool, *, doc=""):
    """true or false."""
    return field(default=default, metadata={"kind": "flag", "doc": doc})


def text(default: str = "", *, max_length: int = 64, doc=""):
    """Printable text of at most ``max_length`` characters."""
    return field(default=default, metadata={"kind": "text", "max": max_length, "doc": doc})


def https_url(default: str = "", *, doc=""):
    """Empty, or an https:// URL with a host."""
    return field(default=default, metadata={"kind": "url", "doc": doc})


def _check(name: str, spec: dict[str, Any], value: Any) -> None:
    kind = spec["kind"]
    if kind == "whole":
        if spec["optional"] and value is None:
            return
        low, high = spec["low"], spec["high"]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            empty = "empty or " if spec["optional"] else ""
            bounds = f"of at least {low}" if high == UNBOUNDED else f"from {low} to {high}"
            raise ServiceError(f"{name} must be {empty}a whole number {bounds}", field=name)
    elif kind == "number":
        low, high = spec["low"], spec["high"]
        ok = not isinstance(value, bool) and isinstance(value, int | float)
        inside = ok and (low < value < high if spec["open"] else low <= value <= high)
        if not inside:
            if high == math.inf:
                bounds = f"above {low:g}" if spec["open"] else f"of at least {low:g}"
            elif spec["open"]:
                bounds = f"between {low:g} and {high:g}"
            else:
                bounds = f"from {low:g} to {high:g}"
            raise ServiceError(f"{name} must be a number {bounds}", field=name)
    elif kind == "flag":
        if not isinstance(value, bool):
            raise ServiceError(f"{name} must be true or false", field=name)
    elif kind == "text":
        if not isinstance(value, str) or len(value) > spec["max"] or not value.isprintable():
            raise ServiceError(
                f"{name} must be text of at most {spec['max']} printable characters", field=name
            )
    elif kind == "url":
        try:
            parts = urlsplit(value) if isinstance(value, str) else None
        except ValueError:  # urlsplit refuses some hosts, e.g. "https://[x" (bad IPv6)
            parts = None
        if parts is None or (value and (parts.scheme != "https" or not parts.netloc)):
            raise ServiceError(f"{name} must be an https:// URL", field=name)
    else:  # pragma: no cover - a field declared without the helpers above
        raise TypeError(f"setting {name} has no kind; declare it with whole/number/flag/...")


def defaults(cls: type) -> dict[str, Any]:
    """Every setting's default, as the JSON a study stores."""
    return {f.name: f.default for f in dataclasses.fields(cls)}


def clean(cls: type[S], raw: dict[str, Any]) -> dict[str, Any]:
    """Check ``raw`` over the defaults and return the JSON to store; ServiceError if invalid.

    Unknown keys are refused by name (a typo must not silently fall back to a default).
    """
    if not isinstance(raw, dict):
        raise ServiceError("Settings must be a JSON object.", field="settings")
    declared = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(declared))
    if unknown:
        raise ServiceError(f"unknown settings: {', '.join(unknown)}", field="settings")
    merged = {**defaults(cls), **raw}
    for name, spec in declared.items():
        _check(name, dict(spec.metadata), merged[name])
    instance = cls(**merged)
    check = getattr(instance, "check", None)
    if check is not None:
        check()
    return merged


def load(cls: type[S], stored: dict[str, Any] | None) -> S:
    """The typed settings of a study from its stored (already clean) JSON over the defaults.

    Keys no longer declared (a setting removed since the study was made) are ignored.
    """
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{**defaults(cls), **{k: v for k, v in (stored or {}).items() if k in names}})


@dataclass(frozen=True)
class CrowdSettings:
    """How crowd workers arrive, how long they may hold a lease, and how they are sent back."""

    # Empty: the study's random secret (Study.completion_code), else the cc= of the URL below.
    completion_code: str = text("")
    # e.g. https://app.prolific.com/submissions/complete?cc=XXXX
    prolific_completion_url: str = https_url("")
    # Prolific's STUDY_ID; when set, an arrival naming another study is refused.
    prolific_study_id: str = text("")
    # None: the mode's own default (Mode.crowd_lease_seconds).
    crowd_lease_seconds: int | None = whole(None, low=30, high=24 * 3600, optional=True)
    # From one client address: new crowd participants per hour, and open leases at once.
    crowd_arrivals_per_address_per_hour: int = whole(3, low=1, high=100_000)
    crowd_open_leases_per_address: int = whole(3, low=1, high=100_000)

    def completion_code_for(self, study) -> str:
        """The code a crowd worker reports: the setting, else Prolific's cc=, else the secret.

        Never derived from anything public (the crowd link carries the study's public id).
        """
        if self.completion_code:
            return self.completion_code
        from_url = parse_qs(urlsplit(self.prolific_completion_url).query).get("cc")
        return from_url[0] if from_url and from_url[0] else study.completion_code
