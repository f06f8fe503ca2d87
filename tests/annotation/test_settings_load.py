"""``modes.settings``' defaults are worked out once per settings class (issue 48: every crowd
request loads its study's settings several times); what callers get must still be theirs."""

import dataclasses

from annotation.modes.settings import CrowdSettings, defaults, load


def test_defaults_are_a_fresh_dict_each_time():
    first = defaults(CrowdSettings)
    first["completion_code"] = "CHANGED"
    first["not_a_setting"] = 1
    again = defaults(CrowdSettings)
    assert again == {f.name: f.default for f in dataclasses.fields(CrowdSettings)}
    assert load(CrowdSettings, None) == CrowdSettings()


def test_load_keeps_stored_values_and_drops_removed_names():
    stored = {"completion_code": "ABC123", "a_removed_setting": True}
    loaded = load(CrowdSettings, stored)
    assert loaded.completion_code == "ABC123"
    assert not hasattr(loaded, "a_removed_setting")
    assert load(CrowdSettings, {}) == CrowdSettings()
