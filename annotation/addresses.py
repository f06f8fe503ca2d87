"""Which address a request comes from, for per-address crowd limits and login throttling.

Parsed strictly and failing closed: a forwarded address is read as a bare IP, ``ip:port``
(some proxies append the source port) or ``[ipv6]:port``; anything else is not skipped but
counted in one shared bucket (``UNPARSED_NETWORK``), so a client cannot escape the
per-network limits by making its address unreadable.
"""

import ipaddress
import re

from django.conf import settings
from django.http import HttpRequest

from annotation.identities import network_of

#: The network every unreadable client address counts in: one bucket shared by all of them
#: (never "unlimited"). Not an address, so it never links to a real network.
UNPARSED_NETWORK = "unparsed"

_BRACKETED = re.compile(r"^\[(?P<host>[^\]]+)\](?::(?P<port>\d{1,5}))?$")
_IPV4_PORT = re.compile(r"^(?P<host>\d{1,3}(?:\.\d{1,3}){3}):(?P<port>\d{1,5})$")


def parse_address(raw: str) -> str | None:
    """The IP address in ``raw`` (bare, ``ipv4:port`` or ``[ipv6]:port``), or None.

    A zone id (``fe80::1%eth0``) is not accepted: it names an interface, not a client.
    """
    raw = raw.strip()
    for pattern in (_BRACKETED, _IPV4_PORT):
        match = pattern.match(raw)
        if match:
            raw = match["host"]
            break
    try:
        parsed = ipaddress.ip_address(raw)
    except ValueError:
        return None
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.scope_id:
        return None
    return str(parsed)


def _candidate(request: HttpRequest) -> str:
    candidate = request.META.get("REMOTE_ADDR", "")
    proxies = settings.CAPEVAL_TRUSTED_PROXIES
    if proxies:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
        forwarded = [part.strip() for part in forwarded if part.strip()]
        if len(forwarded) >= proxies:
            candidate = forwarded[-proxies]
    return candidate


def client_address(request: HttpRequest) -> str | None:
    """The client's address: REMOTE_ADDR, or X-Forwarded-For only behind trusted proxies.

    With ``CAPEVAL_TRUSTED_PROXIES`` = N, the Nth address from the right of X-Forwarded-For
    is the one the outermost trusted proxy saw; anything left of it is the client's to
    forge. Off (0) by default: a client can write any X-Forwarded-For it likes. None when
    the address cannot be read; limits then use ``client_network``'s shared bucket.
    """
    return parse_address(_candidate(request))


def client_network(request: HttpRequest) -> str:
    """The network the client counts as for per-network limits: the IPv4 address, the IPv6
    /64 (``identities.network_of``), or ``UNPARSED_NETWORK`` when the address is unreadable.
    """
    address = client_address(request)
    return network_of(address) if address else UNPARSED_NETWORK
