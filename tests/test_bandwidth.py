"""Bandwidth measurement: a plausible RAM figure, a valid measured profile, a clean GPU skip."""
from __future__ import annotations

import argparse
import datetime
import json

import pytest

from lawbench.core.errors import UsageError
from lawbench.core.hardware import bandwidth, detect
from lawbench.core.commands.profiles import add_profiles_parser, profiles_command
from lawbench.core.hardware.profiles import load_profile_file, load_profiles

# Sanity bounds, not speed goals: any machine that runs this reads RAM faster than 0.2 GB/s, and
# nothing a CPU can reach reads 5 TB/s — a figure above that means the cache was measured.
PLAUSIBLE_GBS = (0.2, 5000.0)


@pytest.fixture(scope="module")
def measured():
    return bandwidth.measure_ram_bandwidth(repeats=3)


def test_ram_bandwidth_is_a_plausible_positive_figure(measured):
    lo, hi = PLAUSIBLE_GBS
    assert lo < measured.median_gbs < hi
    assert len(measured.samples) == 3 and all(s > 0 for s in measured.samples)
    assert min(measured.samples) <= measured.median_gbs <= max(measured.samples)
    assert measured.threads == bandwidth.usable_cpus()
    assert measured.size_bytes >= 1024 ** 3 - 64  # 1 GiB default, trimmed to a whole slice


def test_the_test_array_is_far_larger_than_the_cache(measured):
    llc = bandwidth.last_level_cache_bytes()
    if llc is None:
        pytest.skip("sysfs reports no cache sizes here")
    assert measured.size_bytes >= bandwidth.LLC_MULTIPLE * llc - 64


def test_one_thread_also_measures():
    result = bandwidth.measure_ram_bandwidth(threads=1, repeats=1)
    assert result.threads == 1 and result.median_gbs > PLAUSIBLE_GBS[0]


def test_a_cache_sized_array_is_refused():
    llc = bandwidth.last_level_cache_bytes()
    if llc is None:
        pytest.skip("sysfs reports no cache sizes here")
    with pytest.raises(UsageError, match="last-level cache"):
        bandwidth.measure_ram_bandwidth(size_mb=max(1, llc // 2 ** 20), repeats=1)


def test_bad_arguments_are_usage_errors():
    with pytest.raises(UsageError):
        bandwidth.measure_ram_bandwidth(threads=0)
    with pytest.raises(UsageError):
        bandwidth.measure_ram_bandwidth(repeats=0)


def test_measured_profile_carries_the_figure_and_matches_this_machine(measured):
    profiles = load_profiles()
    fp = detect.fingerprint_machine()
    profile = bandwidth.measured_profile(profiles["cpu"], measured, fp,
                                         when=datetime.date(2026, 1, 2))
    fact = profile.tier("ram").bandwidth_measured_gbs
    assert fact.value == measured.median_gbs
    assert fact.source.startswith("measured by lawbench profiles measure on ")
    assert "2026-01-02" in fact.source and f"median of 3, {measured.threads} threads" in fact.source
    assert profile.tier("ram").bandwidth_gbs() == measured.median_gbs
    assert not profile.fingerprint.generic
    assert detect.profile_matches(fp, profile)
    assert profile.laws == profiles["cpu"].laws  # each law's constants keep their sources


def test_write_measured_profile_writes_a_loadable_file_that_detect_prefers(tmp_path):
    out = tmp_path / "profiles" / "mine.toml"
    out.parent.mkdir()
    path, profile, result = bandwidth.write_measured_profile(
        out=out, threads=1, repeats=1, profile_id="my-box")
    assert path == out and load_profile_file(out) == profile
    assert profile.id == "my-box" and profile.threads == 1
    everything = load_profiles([out.parent])
    chosen, _ = detect.match_profile(detect.fingerprint_machine(), everything)
    if chosen != "my-box":  # a GPU profile is more specific on a GPU machine
        assert everything[chosen].fingerprint.gpu_name_contains
    assert result.median_gbs > PLAUSIBLE_GBS[0]


def test_a_base_without_a_ram_tier_is_refused(measured):
    with pytest.raises(UsageError, match="no RAM tier"):
        bandwidth.measured_profile(load_profiles()["h200"], measured, detect.fingerprint_machine())


def test_cli_measure_prints_the_figure_and_writes_the_file(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_profiles_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "m.toml"
    args = parser.parse_args(["profiles", "measure", "--out", str(out), "--threads", "1",
                              "--repeats", "1", "--json"])
    assert profiles_command(args, extra_dirs=()) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["file"] == str(out) and printed["median_gbs"] > PLAUSIBLE_GBS[0]
    assert load_profile_file(out).tier("ram").bandwidth_measured_gbs.value == printed["median_gbs"]


# --------------------------------------------------------------------------- VRAM


def test_vram_measurement_skips_cleanly_without_gpu_or_cupy():
    result = bandwidth.measure_vram_bandwidth(size_mb=64, repeats=1)
    if result.skipped is None:
        pytest.skip("a GPU and CuPy are present here; see the gpu test")
    assert result.median_gbs is None and result.skipped


@pytest.mark.gpu
def test_vram_bandwidth_on_a_gpu():
    if not detect.list_gpus():
        pytest.skip("no NVIDIA GPU visible through NVML")
    pytest.importorskip("cupy")
    result = bandwidth.measure_vram_bandwidth(size_mb=1024, repeats=3)
    assert result.skipped is None, result.skipped
    assert 10 < result.median_gbs < 20000
