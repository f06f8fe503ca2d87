"""Which address a request comes from, for per-address crowd limits and login throttling."""

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str | None:
    """The client's address: REMOTE_ADDR, or X-Forwarded-For only behind trusted proxies.

    With ``CAPEVAL_TRUSTED_PROXIES`` = N, the Nth address from the right of X-Forwarded-For
    is the one the outermost trusted proxy saw; anything left of it is the client's to
    forge. Off (0) by default: a client can write any X-Forwarded-For it likes.
    """
    candidate = request.META.get("REMOTE_ADDR", "")
    proxies = settings.CAPEVAL_TRUSTED_PROXIES
    if proxies:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
        forwarded = [part.strip() for part in forwarded if part.strip()]
        if len(forwarded) >= proxies:
            candidate = forwarded[-proxies]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return None
