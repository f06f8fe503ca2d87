"""Which participants of a study may be one person: the integrity rules' unit of "one worker".

A paid crowd worker can open several worker ids from several browsers, but rarely from
several networks, and a browser keeps its signed cookie across ids. So two participants of
one study are *linked* when they share a browser (``browser_id``) or a network
(``Participant.network``: the IPv4 address, or the IPv6 /64 that one subscriber usually
holds), directly or through a chain of other participants. The rules that must not be
steered by one person with many ids (who may check whose work, whose votes count towards
stopping or allocation) count a linked group once. Registered accounts carry neither, so
each is its own group.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from django.db.models import Q

#: IPv6 subscribers are usually given a /64 (RFC 6177), so its 2^64 addresses are one network.
IPV6_NETWORK_PREFIX = 64


def network_of(address: str | None) -> str:
    """The network an address counts as: itself for IPv4, its /64 for IPv6; "" if none.

    ``address`` is a valid IP address as ``ipaddress`` prints it (the caller parses the raw
    header); an IPv4-mapped IPv6 address counts as its IPv4 address.
    """
    if not address:
        return ""
    parsed = ipaddress.ip_address(address)
    if parsed.version == 6 and parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    if parsed.version == 4:
        return str(parsed)
    return str(ipaddress.ip_network(f"{parsed}/{IPV6_NETWORK_PREFIX}", strict=False))


def linked_q(participant, *, prefix: str = "") -> Q:
    """Rows (of Participant, or through ``prefix`` such as ``"participant__"``) of the same
    study directly linked to ``participant``: itself, its browser or its network.

    Direct links only (one step); ``identity_groups`` follows chains.
    """
    same = Q(**{f"{prefix}pk": participant.pk})
    if participant.browser_id:
        same |= Q(
            **{
                f"{prefix}study_id": participant.study_id,
                f"{prefix}browser_id": participant.browser_id,
            }
        )
    if participant.network:
        same |= Q(
            **{f"{prefix}study_id": participant.study_id, f"{prefix}network": participant.network}
        )
    return same


def identity_groups(rows: Iterable[tuple[int, str, str]]) -> dict[int, int]:
    """Map each participant id to its group's smallest id, from ``(id, browser_id, network)``.

    Participants sharing a non-empty browser or network are one group, transitively
    (union-find), so one person cannot split their ids into two groups by alternating
    browsers on one network.
    """
    parent: dict[int, int] = {}

    def find(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    first_of: dict[tuple[str, str], int] = {}
    for pid, browser, network in rows:
        parent.setdefault(pid, pid)
        for key in (("b", browser), ("n", network)):
            if not key[1]:
                continue
            if key in first_of:
                union(pid, first_of[key])
            else:
                first_of[key] = pid
    return {pid: find(pid) for pid in parent}
