"""A hardware runner job measures or fails: GPU detection without NVML, a --strict job refused on
a machine that is not its profile's (with the reasons), and a CUDA build for the profile's GPU.

The nvidia-smi and nvcc parsers are tested on what the real tools printed on the H200 machine
(tests/data/h200/*.cmd say how); the refusal runs the real CLI here, where no GPU is visible.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lawbench.core.engines import cuda
from lawbench.core.errors import LawbenchError, UsageError
from lawbench.core.hardware import detect, gpus
from lawbench.core.hardware.profiles import load_profiles

DATA = Path(__file__).parent / "data" / "h200"


def _lawbench(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lawbench.core.commands.main", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300, encoding="utf-8")


def _no_gpu_env(tmp_path: Path) -> dict[str, str]:
    """NVML hidden and no nvidia-smi on PATH: what a GPU runner without its driver looks like."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAWBENCH_")}
    bindir = Path(sys.executable).parent
    env.update(LAWBENCH_GPU_DETECT="nvidia-smi", PATH=f"{bindir}:/usr/bin:/bin",
               GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"), LAWBENCH_OUT=str(tmp_path / "out"))
    return env


# --------------------------------------------------------------------------- nvidia-smi


def test_nvidia_smi_gpu_list_of_the_h200_parses():
    text = (DATA / "smi-gpus.csv").read_text(encoding="utf-8")
    [gpu] = gpus.parse_smi_gpus(text)
    assert (gpu.index, gpu.name, gpu.compute_capability, gpu.driver, gpu.source) == \
        (0, "NVIDIA H200", "9.0", "580.159.04", "nvidia-smi")
    assert gpu.memory_total_gb == pytest.approx(143771 / 1024, abs=0.01)  # MiB -> GiB


def test_h200_found_by_nvidia_smi_alone_matches_its_profile():
    profiles = load_profiles()
    fp = detect.MachineFingerprint(cpu_model="Intel(R) Xeon(R) Processor", ram_total_gb=125.87,
                                   gpus=gpus.parse_smi_gpus((DATA / "smi-gpus.csv").read_text(encoding="utf-8")))
    assert detect.match_profile(fp, profiles)[0] == "h200"
    assert not detect.profile_matches(fp, profiles["gtx1060"])


def test_nvidia_smi_na_cell_reads_as_unknown():
    # Seed 002: on GB10 "nvidia-smi's aggregate usage field reads [N/A]". The real H200 row with
    # that cell as the seed quotes it: the GPU is still found, its memory is unknown, not 0.
    real = (DATA / "smi-gpus.csv").read_text(encoding="utf-8").strip().split(", ")
    real[3] = "[N/A]"
    [gpu] = gpus.parse_smi_gpus(", ".join(real))
    assert gpu.memory_total_gb is None and gpu.compute_capability == "9.0"
    assert gpus.parse_smi_gpus("not a csv row\n\n") == []


def test_nvidia_smi_state_of_the_h200_parses():
    [state] = gpus.parse_smi_state((DATA / "smi-state.csv").read_text(encoding="utf-8"))
    assert state["name"] == "NVIDIA H200" and state["pstate"] == "P0"
    assert state["sm_mhz"] == 345 and state["mem_mhz"] == 3201 and state["power_w"] == pytest.approx(78.24)
    assert state["memory_total_gb"] == pytest.approx(143771 / 1024, abs=0.001)


def test_gpu_detect_source_is_validated(monkeypatch):
    monkeypatch.setenv("LAWBENCH_GPU_DETECT", "nvidia-smi")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert gpus.list_gpus() == []  # no NVML asked, no nvidia-smi found: no GPU, no crash
    monkeypatch.setenv("LAWBENCH_GPU_DETECT", "none")
    assert gpus.list_gpus() == [] and gpus.gpu_state() == []
    monkeypatch.setenv("LAWBENCH_GPU_DETECT", "cuda")
    with pytest.raises(UsageError, match="LAWBENCH_GPU_DETECT='cuda' is not one of"):
        gpus.list_gpus()


# --------------------------------------------------------------------------- CUDA architecture


def test_the_build_follows_the_profiles_compute_capability():
    profiles = load_profiles()
    arches = {pid: cuda.arch_of(p.fingerprint.compute_capability)
              for pid, p in profiles.items() if p.fingerprint.compute_capability}
    assert arches == {"gtx1060": "61", "h200": "90", "gb10": "121"}
    with pytest.raises(LawbenchError, match="not 'major.minor'"):
        cuda.arch_of("sm61")


def test_cuda13_on_the_h200_cannot_build_for_pascal_and_says_which_toolkit_can():
    text = (DATA / "nvcc.txt").read_text(encoding="utf-8")
    release, targets = cuda.parse_release(text), cuda.parse_gpu_codes(text)
    assert release == "13.0" and "90" in targets and "121" in targets and "61" not in targets
    cuda.refuse_unbuildable("90", targets, "/usr/local/cuda/bin/nvcc", release)  # Hopper: fine
    cuda.refuse_unbuildable("121", targets, "/usr/local/cuda/bin/nvcc", release)  # GB10: fine
    with pytest.raises(LawbenchError) as exc:
        cuda.refuse_unbuildable("61", targets, "/usr/local/cuda/bin/nvcc", release)
    assert "(release 13.0) cannot build for sm_61" in str(exc.value)
    assert "install CUDA 8.0 to 12.9" in str(exc.value)
    with pytest.raises(LawbenchError, match="sm_61"):
        cuda.refuse_unbuildable("90;61-real", targets, "nvcc", release)


# --------------------------------------------------------------------------- refusal


@pytest.mark.parametrize("profile", ["gtx1060", "h200", "gb10"])
def test_strict_job_on_a_machine_without_its_gpu_fails_with_reasons(tmp_path, profile):
    done = _lawbench("run", "--profile", profile, "--strict", "-k", "prediction",
                     env=_no_gpu_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert f"this machine does not match profile {profile!r}" in done.stderr
    assert "no: GPU with name containing" in done.stderr and "found: no GPU" in done.stderr
    assert f"lawbench-{profile}" in done.stderr  # which runner the job belongs on
    assert "runner refused" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "the job fails" in done.stderr  # -k prediction selected nothing measured: still a failure
    assert json.loads((tmp_path / "out" / "run.json").read_text(encoding="utf-8"))["results"]  # the predictions ran


def test_strict_job_fails_each_measurement_anchor_with_its_reason(tmp_path):
    # Issue 9: `--profile gtx1060 --strict` on a machine without the card fails, one clear reason
    # per measurement anchor, while the predictions still give their verdicts.
    done = _lawbench("run", "--profile", "gtx1060", "--strict", "-k", "not agree and not census",
                     "--out", str(tmp_path / "o"), env=_no_gpu_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    results = json.loads((tmp_path / "o" / "run.json").read_text(encoding="utf-8"))["results"]
    measured = [r for r in results if r["kind"] != "prediction" and r["profile"] == "gtx1060"]
    assert measured, "no gtx1060 measurement anchor was selected"
    for r in measured:
        assert r["verdict"] in ("FAIL", "SKIP"), r
        if r["verdict"] == "FAIL":
            assert "skipped under --strict: this machine does not match profile 'gtx1060'" in r["reason"], r
            assert "GTX 1060" in r["reason"], r  # names what is missing
        else:
            assert r["reason"].startswith("history:"), r
    assert any(r["kind"] == "prediction" and r["verdict"] == "PASS" for r in results)


def test_without_strict_the_same_machine_only_skips_measurements(tmp_path):
    # A contributor's `--profile h200` on a laptop is allowed: predictions run, nothing is refused.
    done = _lawbench("run", "--profile", "h200", "-k", "prediction", "--out", str(tmp_path / "o"),
                     env=_no_gpu_env(tmp_path), cwd=tmp_path)
    assert "does not match" not in done.stderr
    assert done.returncode in (0, 1) and (tmp_path / "o" / "run.json").is_file()


@pytest.mark.gpu
def test_nvidia_smi_finds_what_nvml_finds(monkeypatch):
    """On a GPU machine the fallback is as good as NVML for matching: same GPUs, same cc."""
    monkeypatch.setenv("LAWBENCH_GPU_DETECT", "nvml")
    via_nvml = gpus.list_gpus()
    monkeypatch.setenv("LAWBENCH_GPU_DETECT", "nvidia-smi")
    via_smi = gpus.list_gpus()
    if not via_nvml and not via_smi:
        pytest.skip("no NVIDIA GPU visible (neither NVML nor nvidia-smi)")
    assert [(g.index, g.name, g.compute_capability, g.driver) for g in via_smi] == \
        [(g.index, g.name, g.compute_capability, g.driver) for g in via_nvml]
    for a, b in zip(via_smi, via_nvml):
        assert a.memory_total_gb == pytest.approx(b.memory_total_gb, rel=0.01)
    profiles = load_profiles()
    monkeypatch.setenv("LAWBENCH_GPU_DETECT", "nvml")
    with_nvml = detect.match_profile(detect.fingerprint_machine(), profiles)[0]
    monkeypatch.setenv("LAWBENCH_GPU_DETECT", "nvidia-smi")
    assert detect.match_profile(detect.fingerprint_machine(), profiles)[0] == with_nvml
