"""Where a judge endpoint may send the platform: public addresses, and what the deployment
lists (issue 45, row 3).

A judge endpoint is an address the server connects to on a researcher's word, and the
run shows what came back. Without a check, any researcher could point it at the server's
own network (the loopback, a database, a cloud's metadata service at 169.254.169.254) and
read the answers in the run's failures, or tell open ports from closed ones. So:

- An endpoint's host must resolve to public addresses only. Refused: loopback, private
  (RFC 1918, IPv6 unique local), link-local, shared (carrier NAT), multicast, reserved,
  unspecified (``0.0.0.0``, ``::``), and every address Python's ``ipaddress`` does not
  call global; an IPv6 address that carries an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``,
  6to4, Teredo, NAT64 ``64:ff9b::``) is checked as that IPv4 address too.
- The check is made when the connection is made (:class:`GuardedTransport`): the host is
  resolved once, every address it resolves to is checked, and the connection goes to a
  checked address, never to the name. A DNS name that answers "public" to a check and
  "loopback" to the connection (a rebind) has no second answer to give.
- A host written as an address (``127.0.0.1``, ``2130706433``, ``0x7f.1``, ``[::1]``), or
  ``localhost``, is refused when the settings are saved already (:func:`url_refusal`),
  with the field named; names are resolved only at connect time.
- A deployment whose judge runs inside (a local vLLM beside the platform, the usual case)
  lists it in ``CAPEVAL_JUDGE_ALLOWED_HOSTS`` (:class:`AddressPolicy`): host names
  (``localhost``, ``vllm``), addresses (``127.0.0.1``) or networks (``10.0.0.0/8``). A
  listed name is trusted whatever it resolves to.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpcore
import httpx

__all__ = [
    "ALLOW_SETTING",
    "AddressPolicy",
    "AddressRefused",
    "GuardedTransport",
    "literal_address",
    "url_refusal",
]

ALLOW_SETTING = "CAPEVAL_JUDGE_ALLOWED_HOSTS"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class AddressRefused(Exception):
    """The endpoint's host is, or resolves to, an address the deployment does not allow.

    Its message names the host as written and never the addresses it resolved to: what an
    internal name resolves to is itself something the researcher should not learn."""

    def __init__(self, host: str):
        self.host = host
        super().__init__(
            f"the endpoint's address is not allowed: {host} is, or resolves to, a loopback, "
            "private, link-local or reserved address, and the platform connects only to "
            f"public ones unless the deployment lists the host in {ALLOW_SETTING}"
        )


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an IP address when it is written as one, in any form the system's
    resolver reads as one (``2130706433``, ``0x7f.1`` and ``127.1`` are 127.0.0.1)."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if host and all(c in "0123456789abcdefxABCDEFX." for c in host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def _embedded(ip: IPAddress) -> list[IPAddress]:
    """``ip`` and any IPv4 address an IPv6 one carries (see the module docstring)."""
    out: list[IPAddress] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        out += [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
        if ip.teredo is not None:
            out += list(ip.teredo)
        if ip in _NAT64:
            out.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return out


def _public(ip: IPAddress) -> bool:
    return all(
        a.is_global
        and not (
            a.is_private
            or a.is_loopback
            or a.is_link_local
            or a.is_multicast
            or a.is_reserved
            or a.is_unspecified
        )
        for a in _embedded(ip)
    )


@dataclass(frozen=True)
class AddressPolicy:
    """Public addresses, plus the host names and networks the deployment lists."""

    names: frozenset[str] = frozenset()
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AddressPolicy:
        """From the setting's entries; ValueError names an entry that is not a host name,
        an address or a network."""
        names, networks = set(), []
        for raw in entries:
            entry = raw.strip().lower()
            if not entry:
                continue
            address = literal_address(entry) if "/" not in entry else None
            if "/" in entry or address is not None:
                try:
                    networks.append(ipaddress.ip_network(address or entry, strict=False))
                except ValueError:
                    raise ValueError(
                        f"{ALLOW_SETTING}: {raw.strip()!r} is not an address or a network"
                    ) from None
            else:
                names.add(entry.rstrip("."))
        return cls(frozenset(names), tuple(networks))

    def allows_name(self, host: str) -> bool:
        return host.strip("[]").lower().rstrip(".") in self.names

    def allows_address(self, ip: IPAddress) -> bool:
        listed = any(a in net for a in _embedded(ip) for net in self.networks if
                     a.version == net.version)  # fmt: skip
        return listed or _public(ip)


def url_refusal(url: str, policy: AddressPolicy) -> str | None:
    """Why ``url`` cannot be a judge endpoint as written (None: it may be, subject to the
    check at connect time). For the settings form: a message for the base URL field."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        return (
            "give the address without a user name or password (user@host); the API key "
            "goes in its own field"
        )
    host = (parts.hostname or "").rstrip(".")
    if not host:
        return "give the endpoint's host name"
    if policy.allows_name(host):
        return None
    address = literal_address(host)
    inside = host == "localhost" or host.endswith(".localhost")
    if inside or (address is not None and not policy.allows_address(address)):
        return (
            f"{host} is a loopback, private, link-local or reserved address; the platform "
            f"connects only to public ones unless the deployment lists the host in "
            f"{ALLOW_SETTING}"
        )
    return None


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only to addresses the policy allows."""

    def __init__(self, policy: AddressPolicy):
        self._policy = policy
        self._backend = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        options = {"timeout": timeout, "local_address": local_address,
                   "socket_options": socket_options}  # fmt: skip
        if self._policy.allows_name(host):
            return await self._backend.connect_tcp(host, port, **options)
        addresses = await self._resolve(host, port, timeout)
        if not addresses or not all(self._policy.allows_address(a) for a in addresses):
            raise AddressRefused(host)
        failure: Exception | None = None
        for address in addresses:  # the checked addresses, never the name again
            try:
                return await self._backend.connect_tcp(str(address), port, **options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def _resolve(self, host: str, port: int, timeout: float | None) -> list[IPAddress]:
        literal = literal_address(host)
        if literal is not None:
            return [literal]
        try:
            with anyio.fail_after(timeout):
                infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"{host} does not resolve ({exc})") from None
        seen: dict[IPAddress, None] = {}
        for _family, _type, _proto, _name, sockaddr in infos:
            # An IPv6 answer's text may carry a zone ("fe80::1%eth0"): the address is before it.
            seen.setdefault(ipaddress.ip_address(str(sockaddr[0]).split("%")[0]), None)
        return list(seen)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport whose connections go only where ``policy`` allows.

    httpx takes no network backend of its own, so the connection pool it builds is
    replaced by one with the same limits over :class:`_GuardedBackend`. No proxy is used:
    a proxy from the environment would make the connection the check sees the proxy's.
    ``ssl_context``: one several transports share (building one reads the CA bundle, about
    16 ms); by default a new one, verifying as httpx does."""

    def __init__(
        self, policy: AddressPolicy, limits: httpx.Limits, ssl_context: ssl.SSLContext | None = None
    ):
        ssl_context = ssl_context or httpx.create_ssl_context(trust_env=False)
        super().__init__(verify=ssl_context, limits=limits, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_GuardedBackend(policy),
        )
