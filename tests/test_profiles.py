"""Hardware profiles: the shipped files load and carry their sources; broken files fail clearly."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from lawbench.core.errors import DataError, UsageError
from lawbench.core.hardware import toml_out
from lawbench.core.hardware.bandwidth import _profile_dict
from lawbench.core.commands.profiles import add_profiles_parser, profiles_command
from lawbench.core.hardware.profiles import (get_profile, load_profile_file, load_profiles,
                                             validate_profile)

from _profile_files import GOOD, broken, write

SHIPPED = {"cpu", "cpu-ddr4", "gb10", "gtx1060", "h200"}


def facts(profile):
    for tier in profile.tiers:
        for fact in (tier.capacity_gb, tier.bandwidth_spec_gbs, tier.bandwidth_measured_gbs):
            if fact is not None:
                yield fact
    from lawbench.core.commands.profiles import _law_facts

    for table in profile.laws.values():  # every law's facts, whatever the law calls them
        yield from (fact for _, fact in _law_facts(table, ()))


# --------------------------------------------------------------------------- shipped profiles


def test_every_shipped_profile_loads():
    profiles = load_profiles()
    assert SHIPPED <= set(profiles)
    folder = resources.files("lawbench.hardware_profiles")
    for entry in folder.iterdir():
        if entry.name.endswith(".toml"):
            assert load_profile_file(entry).id == entry.name.removesuffix(".toml")


@pytest.mark.parametrize("profile_id", sorted(SHIPPED))
def test_every_shipped_number_names_its_source(profile_id):
    profile = load_profiles()[profile_id]
    assert "self-hosted" in profile.runner_labels
    for fact in facts(profile):
        assert len(fact.source) > 10, fact
    if profile.fingerprint.generic:
        return
    assert profile.fingerprint.cpu_model_contains or profile.fingerprint.gpu_name_contains


def test_generic_cpu_profile_leaves_bandwidth_to_the_machine():
    cpu = load_profiles()["cpu"]
    assert cpu.fingerprint.generic
    ram = cpu.tier("ram")
    assert ram.bandwidth_measured_gbs is None and ram.bandwidth_spec_gbs is None
    with pytest.raises(ValueError, match="no bandwidth"):
        ram.bandwidth_gbs()
    # No law table either: Law 4's published η values are fractions of the reference box's spec
    # bandwidth, so the cpu anchors calibrate η·BW in the run (anchors/law4/cpu.toml).
    assert cpu.laws == {}
    assert [p.id for p in load_profiles().values() if p.fingerprint.generic] == ["cpu"]


@pytest.mark.parametrize("profile_id", sorted(SHIPPED))
def test_profiles_survive_a_toml_round_trip(profile_id):
    import tomllib

    profile = load_profiles()[profile_id]
    text = toml_out.dumps(_profile_dict(profile))
    assert validate_profile(tomllib.loads(text), "round-trip") == profile


# --------------------------------------------------------------------------- extra folders


def test_an_extra_folder_adds_profiles(tmp_path):
    write(tmp_path / "more", "mine.toml", GOOD.format(id="mine"))
    profiles = load_profiles([tmp_path / "more"])
    assert "mine" in profiles and SHIPPED <= set(profiles)


def test_duplicate_id_names_both_files(tmp_path):
    first = write(tmp_path / "a", "one.toml", GOOD.format(id="twice"))
    second = write(tmp_path / "b", "two.toml", GOOD.format(id="twice"))
    with pytest.raises(DataError) as err:
        load_profiles([tmp_path / "a", tmp_path / "b"])
    assert str(first) in str(err.value) and str(second) in str(err.value)
    assert err.value.field == "id"


def test_duplicate_of_a_shipped_id_is_an_error(tmp_path):
    write(tmp_path, "x.toml", GOOD.format(id="gtx1060"))
    with pytest.raises(DataError, match="gtx1060.toml"):
        load_profiles([tmp_path])


def test_missing_folder_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_profiles([tmp_path / "nowhere"])


def test_unknown_profile_lists_known_ids():
    with pytest.raises(UsageError) as err:
        get_profile("gtx1070", load_profiles())
    for pid in SHIPPED:
        assert pid in str(err.value)


# --------------------------------------------------------------------------- broken files


def test_broken_toml_names_the_file_and_line(tmp_path):
    err = broken(tmp_path, 'id = "x"\ndescription = \n')
    assert "malformed TOML" in err.message and "line 2" in err.message


def test_unknown_tier_field_names_the_field_and_what_is_allowed(tmp_path):
    err = broken(tmp_path, GOOD.format(id="x").replace("bandwidth_spec_gbs", "bandwith_spec_gbs"))
    assert err.field == "tiers.0.bandwith_spec_gbs"
    assert "unknown field" in err.message and "bandwidth_spec_gbs" in err.message


def test_a_misspelt_required_field_is_named_with_the_field_it_resembles(tmp_path):
    err = broken(tmp_path, GOOD.format(id="x").replace("description =", "descripton ="))
    assert err.field == "descripton"
    assert err.message == "unknown field 'descripton'; did you mean 'description'? (it is required and missing)"


def test_unknown_fact_field(tmp_path):
    err = broken(tmp_path, GOOD.format(id="x").replace('source = "test" }\n[laws',
                                                       'source = "test", unit = "GB/s" }\n[laws'))
    assert err.field == "tiers.0.bandwidth_spec_gbs.unit"
    assert "estimate" in err.message  # the allowed fields of a Fact


def test_a_number_that_is_not_a_number(tmp_path):
    err = broken(tmp_path, GOOD.format(id="x").replace("value = 10.0", 'value = "fast"'))
    assert err.field == "tiers.0.bandwidth_spec_gbs.value"
    assert "'fast'" in err.message


def test_a_bad_tier_kind(tmp_path):
    err = broken(tmp_path, GOOD.format(id="x").replace('kind = "ram"', 'kind = "hbm"'))
    assert err.field == "tiers.0.kind"


def test_a_bad_id(tmp_path):
    err = broken(tmp_path, GOOD.format(id="My Box"))
    assert err.field == "id" and "lower-case" in err.message


def test_duplicate_tier_names(tmp_path):
    text = GOOD.format(id="x") + '[[tiers]]\nname = "ram"\nkind = "ram"\n'
    # TOML puts the second [[tiers]] after [laws.law4.eta]; still one array, two tiers named "ram"
    err = broken(tmp_path, text)
    assert "unique" in err.message


# --------------------------------------------------------------------------- CLI


def _args(*argv):
    import argparse

    parser = argparse.ArgumentParser()
    add_profiles_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["profiles", *argv])


def test_cli_lists_every_profile(capsys):
    assert profiles_command(_args(), extra_dirs=()) == 0
    out = capsys.readouterr().out
    for pid in SHIPPED:
        assert pid in out


def test_cli_show_keeps_est_markers(capsys):
    assert profiles_command(_args("show", "gtx1060"), extra_dirs=()) == 0
    assert "[est]" in capsys.readouterr().out


def test_cli_reports_a_broken_folder_without_a_traceback(tmp_path, capsys):
    write(tmp_path, "bad.toml", 'id = "x"\n[[tiers]]\nname = 1\n')
    assert profiles_command(_args("--profile-dir", str(tmp_path)), extra_dirs=()) == 2
    err = capsys.readouterr().err
    assert "bad.toml" in err and "Traceback" not in err


# --------------------------------------------------------------------------- a law's own table


def test_a_law_validates_its_own_table_with_the_profile_handed_in(tmp_path):
    """Core knows no law's terms: [laws.<name>] is checked by that law's profile_model, which is
    handed the profile (its tiers) and reports a field core prefixes with laws.<name>."""
    import tomllib

    from pydantic import ValidationInfo, model_validator

    from lawbench import Fact, Law, Strict

    class Table(Strict):
        speed: dict[str, Fact] = {}

        @model_validator(mode="after")
        def _tiers(self, info: ValidationInfo) -> "Table":
            tiers = [t.name for t in info.context["profile"].tiers]
            for key in self.speed:
                if key not in tiers:
                    raise ValueError(f"speed.{key}: no tier {key!r} (tiers: {', '.join(tiers)})")
            return self

    class MyLaw(Law):
        name = "mylaw"
        profile_model = Table

    text = GOOD.format(id="x") + '[laws.mylaw.speed]\nvram = { value = 1, source = "t" }\n'
    with pytest.raises(DataError) as err:
        validate_profile(tomllib.loads(text), "my.toml", laws={"mylaw": MyLaw()})
    assert str(err.value).startswith("my.toml") and err.value.field == "laws.mylaw.speed.vram"
    assert "no tier 'vram' (tiers: ram)" in err.value.message
    good = validate_profile(tomllib.loads(text.replace("vram =", "ram =")), "my.toml", laws={"mylaw": MyLaw()})
    assert good.law_table("mylaw", Table).speed["ram"].value == 1
    # A law not installed here: its table is kept as written, for the law that will read it.
    kept = validate_profile(tomllib.loads(text), "my.toml", laws={})
    assert kept.laws["mylaw"] == {"speed": {"vram": {"value": 1, "source": "t"}}}


def test_the_cli_shows_a_law_tables_facts_under_its_name(capsys):
    assert profiles_command(_args("show", "gtx1060"), extra_dirs=()) == 0
    out = capsys.readouterr().out
    assert "laws.law4.eta.vram" in out and "laws.law4.eta_format.vram.Q4_0" in out
    assert "laws.law4.constants.eta_kv" in out


def test_core_names_no_law_in_a_profile():
    """A profile's per-law constants live behind the law (issue 21): no module of core names Law 4's
    η tables or constants, nor reads a law's table other than through law_table()."""
    import re

    core = Path(__file__).resolve().parent.parent / "core"
    words = re.compile(r"eta_format|\beta_for\b|\beta_fact\b|[\"']eta[\"']|\.eta\b|(?<!gguf)\.constants\b|\[eta\]|ETA_MAX")
    found = [f"{path.relative_to(core.parent)}:{n}: {line.strip()}"
             for path in sorted(core.rglob("*.py")) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if words.search(line)]
    assert found == []
    text = (core / "models" / "profile.py").read_text(encoding="utf-8")
    assert "η" not in text and not re.search(r"\beta(_\w+)?\b", text)
