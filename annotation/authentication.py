"""Login throttling: django-axes in front of every password check (form, admin, API Basic).

Axes counts failures per (user name, address) pair and, once locked, refuses before the
password is hashed; the settings (``AXES_*`` in ``capeval.settings.base``) say how many
failures and for how long. This module only adapts axes to the two places it does not
cover on its own.
"""

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from drf_spectacular.authentication import BasicScheme
from rest_framework import exceptions
from rest_framework.authentication import BasicAuthentication


class LoginThrottleBackend(AxesStandaloneBackend):
    """Axes' lockout check, first in ``AUTHENTICATION_BACKENDS``; ModelBackend follows.

    Axes refuses a call without a request. Every HTTP entry point passes one (Django's login
    view and admin, DRF's Basic auth; ``tests/annotation/test_hardening.py`` brute-forces
    them), so a call without one comes from code on the server (shell, management commands,
    tests): there is no remote client to throttle, and the check is skipped, not failed.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


class LockedOut(exceptions.AuthenticationFailed):
    """Refused credentials, answered as any others (401/403, as the schema documents: a
    generated client or Schemathesis reads 429 as "slow down", not "not logged in"), with
    axes' message, ``code`` ``locked_out`` and a Retry-After header (DRF's handler turns
    ``wait`` into it). The pages' login form still answers 429 (axes' lockout page)."""

    default_code = "locked_out"

    def __init__(self):
        super().__init__(detail={"detail": settings.AXES_COOLOFF_MESSAGE, "code": "locked_out"})
        self.wait = int(settings.AXES_COOLOFF_TIME.total_seconds())


class ThrottledBasicAuthentication(BasicAuthentication):
    """HTTP Basic auth that says "locked out" instead of "invalid password" when it is.

    DRF passes its own Request to ``authenticate``, so axes' lockout flag lands on that
    wrapper and ``AxesMiddleware`` (which sees the Django request) cannot answer for it;
    the refusal itself already happened in axes' backend or failure handler.
    """

    def authenticate_credentials(self, userid, password, request=None):
        try:
            return super().authenticate_credentials(userid, password, request)
        except exceptions.AuthenticationFailed:
            if request is not None and getattr(request, "axes_locked_out", False):
                raise LockedOut() from None
            raise


class ThrottledBasicScheme(BasicScheme):
    """The OpenAPI schema describes it as what it is to clients: HTTP Basic auth."""

    target_class = "annotation.authentication.ThrottledBasicAuthentication"
