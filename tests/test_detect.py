"""Machine detection: fingerprint this machine, pick the most specific profile, refuse a mismatch."""
from __future__ import annotations

import argparse
import json

import pytest

from lawbench.core.hardware import detect
from lawbench.core.commands.profiles import add_profiles_parser, profiles_command
from lawbench.core.hardware.detect import MachineFingerprint
from lawbench.core.hardware.gpus import GpuInfo
from lawbench.core.hardware.profiles import load_profiles

GTX1060 = GpuInfo(index=0, name="NVIDIA GeForce GTX 1060 6GB", compute_capability="6.1",
                  memory_total_gb=5.93, driver="535.183.01")
H200 = GpuInfo(index=0, name="NVIDIA H200", compute_capability="9.0", memory_total_gb=139.8)
GB10 = GpuInfo(index=0, name="NVIDIA GB10", compute_capability="12.1", memory_total_gb=None)


def machine(cpu="AMD EPYC", ram=23.5, gpus=()):
    return MachineFingerprint(hostname="test", cpu_model=cpu, cpu_count_logical=4, ram_total_gb=ram,
                              gpus=list(gpus))


@pytest.fixture(scope="module")
def profiles():
    return load_profiles()


# --------------------------------------------------------------------------- this machine


def test_fingerprint_of_this_machine_is_plausible():
    fp = detect.fingerprint_machine()
    assert fp.cpu_count_logical >= 1
    assert fp.ram_total_gb > 0.1
    assert fp.cpu_model
    assert set(fp.cpu_flags) <= set(detect.INTERESTING_FLAGS)
    json.dumps(fp.model_dump())  # what `profiles detect --json` prints


def test_gpu_listing_never_crashes():
    gpus = detect.list_gpus()  # no library, no driver, no GPU: an empty list
    assert isinstance(gpus, list)
    for g in gpus:
        assert g.name


def test_this_machine_without_a_gpu_picks_cpu(profiles):
    fp = detect.fingerprint_machine()
    if fp.gpus or "i5-7600K" in fp.cpu_model:
        pytest.skip("this machine has a GPU or is the reference box: a specific profile may match")
    chosen, reasons = detect.match_profile(fp, profiles)
    assert chosen == "cpu"
    assert any("generic" in r for r in reasons)
    assert not detect.profile_matches(fp, profiles["gtx1060"])


@pytest.mark.gpu
def test_this_gpu_machine_picks_a_profile_that_names_its_gpu(profiles):
    fp = detect.fingerprint_machine()
    if not fp.gpus:
        pytest.skip("no NVIDIA GPU visible through NVML")
    chosen, reasons = detect.match_profile(fp, profiles)
    names = " ".join(g.name for g in fp.gpus)
    wanted = profiles[chosen].fingerprint.gpu_name_contains
    if wanted is None:
        pytest.skip(f"no shipped profile for {names}; detected {chosen}")
    assert wanted.lower() in names.lower(), reasons
    assert any(g.compute_capability for g in fp.gpus)


def test_environment_snapshot_records_the_machine_state():
    snap = detect.environment_snapshot()
    for key in ("ram_available_gb", "ram_free_gb", "page_cache_gb", "load_avg", "cpu_freq_mhz",
                "hostname", "kernel", "python", "gpus"):
        assert key in snap
    assert 0 < snap["ram_available_gb"] <= snap["ram_total_gb"]
    json.dumps(snap)  # goes into the run record as-is


# --------------------------------------------------------------------------- fake machines


def test_a_gtx_1060_box_picks_gtx1060(profiles):
    chosen, reasons = detect.match_profile(machine(ram=15.6, gpus=[GTX1060]), profiles)
    assert chosen == "gtx1060"
    assert any("GTX 1060" in r and r.startswith("ok") for r in reasons)


def test_the_reference_box_prefers_its_gpu_profile_and_accepts_its_cpu_runner(profiles):
    box = machine(cpu="Intel(R) Core(TM) i5-7600K CPU @ 3.80GHz", ram=15.6, gpus=[GTX1060])
    chosen, reasons = detect.match_profile(box, profiles)
    assert chosen == "gtx1060"
    assert any("cpu-ddr4" in r for r in reasons)
    assert detect.profile_matches(box, profiles["cpu-ddr4"])  # its CPU runner may run here


def test_the_reference_box_without_its_gpu_is_cpu_ddr4(profiles):
    box = machine(cpu="Intel(R) Core(TM) i5-7600K CPU @ 3.80GHz", ram=15.6)
    assert detect.match_profile(box, profiles)[0] == "cpu-ddr4"


def test_a_gtx_1060_with_more_ram_is_not_the_reference_box(profiles):
    chosen, _ = detect.match_profile(machine(ram=62.8, gpus=[GTX1060]), profiles)
    assert chosen == "cpu"


def test_h200_and_gb10(profiles):
    assert detect.match_profile(machine(ram=125.0, gpus=[H200]), profiles)[0] == "h200"
    assert detect.match_profile(machine(cpu="", ram=119.7, gpus=[GB10]), profiles)[0] == "gb10"


def test_wrong_compute_capability_does_not_match(profiles):
    odd = GTX1060.model_copy(update={"compute_capability": "7.5"})
    assert not detect.profile_matches(machine(ram=15.6, gpus=[odd]), profiles["gtx1060"])


def test_a_runner_without_the_gpu_is_refused_with_reasons(profiles):
    ok, reasons = detect.match_reasons(machine(ram=15.6), profiles["gtx1060"])
    assert not ok
    assert any(r.startswith("no:") and "GTX 1060" in r and "no GPU" in r for r in reasons)


def test_the_generic_profile_matches_anything(profiles):
    assert detect.profile_matches(machine(), profiles["cpu"])
    assert detect.profile_matches(machine(gpus=[H200]), profiles["cpu"])


def test_no_generic_profile_loaded(profiles):
    only_gpu = {"h200": profiles["h200"]}
    chosen, reasons = detect.match_profile(machine(), only_gpu)
    assert chosen == "" and "no generic profile" in reasons[0]


# --------------------------------------------------------------------------- CLI


def _args(*argv):
    parser = argparse.ArgumentParser()
    add_profiles_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["profiles", *argv])


def test_cli_detect_json(capsys):
    assert profiles_command(_args("detect", "--json"), extra_dirs=()) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["profile"] in out["matches"] and out["matches"][out["profile"]]
    assert out["fingerprint"]["cpu_count_logical"] >= 1


def test_cli_detect_expect_refuses_a_mismatched_runner(capsys):
    fp = detect.fingerprint_machine()
    if any("H200" in g.name for g in fp.gpus):
        pytest.skip("this machine is an H200")
    assert profiles_command(_args("detect", "--expect", "h200"), extra_dirs=()) == 1
    assert "does not match profile 'h200'" in capsys.readouterr().err


def test_cli_detect_expect_unknown_profile(capsys):
    assert profiles_command(_args("detect", "--expect", "nope"), extra_dirs=()) == 2
    assert "known profiles" in capsys.readouterr().err
