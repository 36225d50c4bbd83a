"""The band rule (docs/bands.md): `lawbench check` refuses a measured anchor whose band its own
instrument cannot resolve on its profile, per kind of figure, from the profile's noise table; it
accepts an adequate band, exempts deterministic figures and one-sided claims, and a print-limited
anchor must say why."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import carrier_plugin, run_cli
from pydantic import ValidationError

from lawbench.core.claims.loading import LoadedAnchor
from lawbench.core.models import Anchor, HardwareProfile
from lawbench.core.stats.resolution import (basis_counts, check_resolution, noise_kind,
                                      resolvable_half_width)

PROFILE = {
    "id": "box", "description": "a test box",
    "fingerprint": {"cpu_model_contains": "Test CPU"},
    "tiers": [{"name": "ram", "kind": "ram"}],
    "noise": {
        "decode": {"within": 0.01, "between": 0.13, "source": "register C-02"},
        "prefill": {"within": 0.018, "between": 0.13, "source": "register C-04, L-31"},
        "ratio": {"within": 0.0141, "source": "C-02 per arm, two arms"},
        "memory": {"within": 0.0, "floor": 3.0, "floor_unit": "MiB", "source": "seed 002"},
        "acceptance": {"within": 0.0, "floor": 0.1, "floor_unit": "%", "source": "test: a reading's last digit"},
        "perplexity": {"within": 0.0, "between": 0.013, "source": "L-24: 7.7207 +/- 0.1024"},
    },
}

# kind of figure -> (anchor fields, a band it cannot resolve, a band it can)
CASES = {
    "decode": ({"kind": "measurement", "unit": "tok/s", "value": 22.81}, {"abs": 0.11}, {"rel": 0.15}),
    "prefill": ({"kind": "measurement", "unit": "tok/s", "value": 392.9, "noise": "prefill"},
                {"rel": 0.10}, {"rel": 0.16}),
    "ratio": ({"kind": "ratio", "unit": "x", "value": 1.19}, {"lo": 1.1822, "hi": 1.1928}, {"rel": 0.02}),
    "agreement": ({"kind": "agreement", "unit": "tok/s"}, {"lo": 0.983, "hi": 1.017}, {"rel": 0.25}),
    "memory": ({"kind": "measurement", "unit": "MiB", "value": 7636.0}, {"abs": 0.5}, {"abs": 3.0}),
    "acceptance": ({"kind": "measurement", "unit": "%", "value": 35.9, "noise": "acceptance"},
                   {"lo": 35.85, "hi": 35.95}, {"lo": 34.9, "hi": 36.9}),
    "perplexity": ({"kind": "measurement", "unit": "ppl", "value": 7.72, "noise": "perplexity"},
                   {"abs": 0.05}, {"abs": 0.12}),
}


def anchor(aid: str, band: dict, **fields) -> Anchor:
    raw = {"id": aid, "law": "law4", "claim": "c", "quantity": "q", "band": band, "profiles": ["box"],
           "provenance": {"seed": "000_4a91008eeaefec79.txt"}, **fields}
    if raw["kind"] == "ratio":
        raw["arms"] = {"a": {}, "b": {}}
    return Anchor.model_validate(raw)


def check(*anchors: Anchor, profile: dict = PROFILE):
    return check_resolution([LoadedAnchor(a, "anchors/x.toml") for a in anchors],
                            {"box": HardwareProfile.model_validate(profile)})


@pytest.mark.parametrize("what", sorted(CASES))
def test_a_too_narrow_band_is_refused_in_one_line(what):
    fields, narrow, _ = CASES[what]
    errors = check(anchor(f"t.{what}", narrow, **fields))
    assert len(errors) == 1, errors
    line = str(errors[0])
    assert "\n" not in line
    assert line.startswith(f"anchors/x.toml: anchor t.{what}: field band: "), line
    assert "narrower than" in line and "profile 'box'" in line


@pytest.mark.parametrize("what", sorted(CASES))
def test_an_adequate_band_is_accepted(what):
    fields, _, wide = CASES[what]
    assert check(anchor(f"t.{what}", wide, **fields)) == []


def test_the_resolution_is_drift_plus_what_the_budget_buys():
    a = anchor("t.d", {"rel": 0.2}, kind="measurement", unit="tok/s", value=100.0,
               budget={"min_samples": 3, "max_samples": 9, "batch": 3})
    noise = HardwareProfile.model_validate(PROFILE).noise["decode"]
    # 3 looks at 1 - 0.05/3; t(0.99167, 8) = 3.0; 13 + 3.0 x 1 / 3 = 14.0 %
    assert resolvable_half_width(a, noise, 100.0) == pytest.approx(14.0, abs=0.05)
    more = a.model_copy(update={"budget": a.budget.model_copy(update={"max_samples": 30})})
    assert resolvable_half_width(more, noise, 100.0) < 14.0  # samples shrink the within part only
    assert resolvable_half_width(more, noise, 100.0) > 13.0


def test_a_band_narrower_than_the_reproduction_figure_is_refused_whatever_its_samples_resolve():
    """Rule 2's floor: a published one-session error bar, or a print's rounding interval, narrower
    than how far the source says such a figure moves on the box is not the band."""
    repro = dict(PROFILE, noise={**PROFILE["noise"], "ratio": {
        "within": 0.0141, "source": "C-02 per arm, two arms",
        "reproduction": 0.02, "reproduction_source": "D-22: 'ratio 0.99-1.02'"}})
    fields = {"kind": "ratio", "unit": "x", "value": 1.046,
              "budget": {"min_samples": 3, "max_samples": 21, "batch": 3}}
    narrow = anchor("t.mtp", {"abs": 0.01}, **fields)  # ±0.96 %: 21 rounds resolve it (0.92 %)
    assert check(narrow) == []
    errors = check(narrow, profile=repro)
    assert len(errors) == 1, errors
    line = str(errors[0])
    assert "field band" in line and "reproduction figure for a ratio figure on profile 'box' (±2 %: D-22" in line
    assert check(anchor("t.mtp", {"rel": 0.02}, **fields), profile=repro) == []
    with pytest.raises(ValidationError, match="reproduction_source"):
        HardwareProfile.model_validate(dict(PROFILE, noise={"ratio": {"within": 0.01, "source": "s",
                                                                      "reproduction": 0.02}}))


def test_exempt_deterministic_one_sided_and_unmeasured():
    assert check(anchor("t.bytes", {"abs": 0.5}, kind="measurement", unit="B", value=1024.0)) == []
    assert check(anchor("t.gb", {"abs": 0.005}, kind="measurement", unit="GB", value=3.8,
                        noise="deterministic")) == []
    assert check(anchor("t.sign", {"lo": 1.0}, kind="measurement", unit="x")) == []
    assert check(anchor("t.pred", {"abs": 0.001}, kind="prediction", unit="tok/s", value=22.7)) == []
    assert check(anchor("t.old", {"abs": 0.001}, kind="measurement", unit="tok/s", value=22.7,
                        status="retired", retired_reason="replaced")) == []


def test_a_profile_without_the_kind_or_a_unit_without_one_is_refused():
    bare = dict(PROFILE, noise={})
    errors = check(anchor("t.d", {"rel": 0.5}, kind="measurement", unit="tok/s", value=1.0), profile=bare)
    assert len(errors) == 1 and "field noise: profile 'box' states no noise for a decode figure" in str(errors[0])
    errors = check(anchor("t.u", {"rel": 0.5}, kind="measurement", unit="dB", value=1.0))
    assert len(errors) == 1 and "field noise: unit 'dB' does not say" in str(errors[0])


def test_print_limited_needs_its_reason_and_is_still_judged():
    with pytest.raises(ValidationError, match="resolution_reason"):
        anchor("t.p", {"rel": 0.5}, kind="measurement", unit="tok/s", value=1.0, resolution="print-limited")
    with pytest.raises(ValidationError, match="resolution_reason"):
        anchor("t.p", {"rel": 0.5}, kind="measurement", unit="tok/s", value=1.0, resolution_reason="why")
    narrow = anchor("t.p", {"rel": 0.01}, kind="measurement", unit="tok/s", value=1.0,
                    resolution="print-limited", resolution_reason="no basis in the register")
    assert len(check(narrow)) == 1  # print-limited borrows the nearest basis; it is not a pass
    counts = basis_counts([LoadedAnchor(narrow, "x.toml")])
    assert counts["box"]["print-limited"] == 1


def test_noise_table_rejects_unknown_kinds_and_a_floor_without_unit():
    with pytest.raises(ValidationError, match="noise"):
        HardwareProfile.model_validate(dict(PROFILE, noise={"decoed": {"within": 0.01, "source": "s"}}))
    with pytest.raises(ValidationError, match="floor_unit"):
        HardwareProfile.model_validate(dict(PROFILE, noise={"memory": {"within": 0.0, "floor": 3.0, "source": "s"}}))


def test_noise_kind_defaults_from_kind_and_unit():
    assert noise_kind(anchor("a", {"rel": 0.2}, kind="agreement", unit="x")) == "ratio"
    assert noise_kind(anchor("b", {"rel": 0.2}, kind="agreement", unit="tok/s")) == "decode"
    assert noise_kind(anchor("c", {"rel": 0.2}, kind="measurement", unit="MiB", value=1.0)) == "memory"


def test_every_shipped_band_is_resolvable_and_says_its_basis():
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.claims.loading import load_all
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    profiles = plugin_profiles(reg, strict=True)
    anchors = load_all(reg, profiles=profiles.keys())
    assert [str(e) for e in check_resolution(anchors.anchors, profiles)] == []
    for la in anchors.anchors:
        a = la.anchor
        if a.runs and a.kind not in ("census", "prediction") and noise_kind(a) != "deterministic" \
                and "law4/cpu.toml" not in la.file and "/law1/" not in la.file and "/law3/" not in la.file:
            assert a.band_basis or a.resolution, f"{la.file}: {a.id}: band_basis is unstated"


ANCHOR = """
[[anchor]]
id = "bandsbox.decode"
law = "bandsbox"
claim = "The box decodes at 22.81 tok/s."
quantity = "decode_tok_s"
unit = "tok/s"
kind = "measurement"
value = 22.81
band = {band}
profiles = ["bands-box"]
provenance = {{ seed = "000_4a91008eeaefec79.txt" }}
"""

BOX = """
id = "bands-box"
description = "a box for the band rule's test"
[fingerprint]
cpu_model_contains = "No Such CPU 9001"
[[tiers]]
name = "ram"
kind = "ram"
[noise.decode]
within = 0.01
between = 0.13
source = "register C-02"
"""


def test_check_refuses_a_shipped_too_narrow_band(cli_env, tmp_path: Path):
    site = tmp_path / "site"
    pkg = carrier_plugin(site, "bandsbox", {"a.toml": textwrap.dedent(ANCHOR.format(band="{ abs = 0.11 }"))},
                         profiles={"bands-box.toml": textwrap.dedent(BOX)})
    p = run_cli(["check"], dict(cli_env, PYTHONPATH=f"{site}:{cli_env.get('PYTHONPATH', '')}"), tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    line = next(ln for ln in p.stderr.splitlines() if "bandsbox.decode" in ln)
    assert line.startswith(f"lawbench: error: {pkg / 'anchors' / 'a.toml'}: anchor bandsbox.decode: field band: ")
    (pkg / "anchors" / "a.toml").write_text(textwrap.dedent(ANCHOR.format(band="{ rel = 0.15 }")), encoding="utf-8")
    p = run_cli(["check"], dict(cli_env, PYTHONPATH=f"{site}:{cli_env.get('PYTHONPATH', '')}"), tmp_path)
    assert "bandsbox.decode" not in p.stderr, p.stderr


def test_a_print_limited_verdict_carries_its_reason_into_every_report():
    from lawbench.core.run.evaluate import _note_print_limited
    from lawbench.core.models import Result, Verdict

    a = anchor("t.p", {"rel": 0.5}, kind="measurement", unit="%", value=35.9, noise="acceptance",
               resolution="print-limited", resolution_reason="the register publishes no prompt")
    r = _note_print_limited(a, Result(anchor_id=a.id, law="law4", kind=a.kind, profile="box", quantity="q",
                                      unit="%", verdict=Verdict.PASS))
    assert r.reason == "print-limited band: the register publishes no prompt"
    assert r.print_limited == "the register publishes no prompt"
