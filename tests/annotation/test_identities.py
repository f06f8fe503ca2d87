"""Linked identities: networks of addresses and groups of participants that may be one person."""

import pytest

from annotation.identities import identity_groups, linked_q, network_of
from annotation.models import Participant


def test_network_of_ipv4_is_the_address_and_ipv6_its_64():
    assert network_of("203.0.113.7") == "203.0.113.7"
    assert network_of("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64"
    assert network_of("2001:db8:1:2:ffff:ffff:ffff:ffff") == "2001:db8:1:2::/64"
    assert network_of("2001:db8:1:3::1") != network_of("2001:db8:1:2::1")
    assert network_of("::ffff:203.0.113.7") == "203.0.113.7"
    assert network_of(None) == "" and network_of("") == ""


def test_identity_groups_follow_chains_of_browsers_and_networks():
    rows = [
        (1, "b1", "n1"),
        (2, "b2", "n1"),  # same network as 1
        (3, "b2", "n2"),  # same browser as 2, so linked to 1 through 2
        (4, "", ""),  # an account: alone
        (5, "b5", "n5"),
    ]
    groups = identity_groups(rows)
    assert groups[1] == groups[2] == groups[3] == 1
    assert groups[4] == 4 and groups[5] == 5


@pytest.mark.django_db
def test_linked_q_finds_same_browser_or_network_within_the_study(make_study):
    study = make_study("vicr")
    other = make_study("vicr", name="Other")

    def make(study, ext, browser, address):
        from annotation.identities import network_of

        return Participant.objects.create(
            study=study,
            source="prolific",
            external_id=ext,
            browser_id=browser,
            address=address,
            network=network_of(address),
        )

    me = make(study, "w1", "b1", "2001:db8::1")
    same_net = make(study, "w2", "b2", "2001:db8::2")
    same_browser = make(study, "w3", "b1", "198.51.100.1")
    stranger = make(study, "w4", "b4", "198.51.100.9")
    elsewhere = make(other, "w1", "b1", "2001:db8::1")
    linked = set(Participant.objects.filter(linked_q(me)).values_list("pk", flat=True))
    assert linked == {me.pk, same_net.pk, same_browser.pk}
    assert stranger.pk not in linked and elsewhere.pk not in linked
