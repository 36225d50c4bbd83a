"""LAWBENCH_PROFILE_DIRS: a contributor's own profile folder (what `lawbench profiles measure`
wrote) is read by every command, as a plugin's folder would be."""
from __future__ import annotations

import os
from pathlib import Path

from conftest import run_cli

from lawbench.core.hardware.detect import fingerprint_machine

CPU_TOML = Path(__file__).resolve().parents[1] / "hardware_profiles" / "cpu.toml"


def my_box(folder: Path) -> Path:
    """The cpu profile made specific to this machine, as `profiles measure --base cpu` makes it."""
    fp = fingerprint_machine()
    text = CPU_TOML.read_text(encoding="utf-8").replace('id = "cpu"', 'id = "my-box"', 1)
    text = text.replace('runner_labels = ["self-hosted", "lawbench-cpu"]', 'runner_labels = ["self-hosted", "lawbench-my-box"]')
    text = text.replace("[fingerprint]\ngeneric = true", f"[fingerprint]\ncpu_model_contains = {fp.cpu_model!r}")
    assert "my-box" in text and "generic = true" not in text
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "my-box.toml").write_text(text, encoding="utf-8")
    return folder


def env_with(folders: str) -> dict:
    return {**os.environ, "LAWBENCH_PROFILE_DIRS": folders}


def test_a_profile_folder_in_the_variable_is_listed_checked_and_detected(tmp_path):
    folder = my_box(tmp_path / "profiles")
    p = run_cli(["profiles"], env_with(str(folder)), tmp_path)
    assert p.returncode == 0 and "my-box" in p.stdout, p.stderr
    p = run_cli(["check"], env_with(str(folder)), tmp_path)
    assert p.returncode == 0 and "6 profiles" in p.stdout, p.stdout + p.stderr
    p = run_cli(["profiles", "detect"], env_with(str(folder)), tmp_path)
    assert p.returncode == 0 and "my-box" in p.stdout


def test_run_on_a_detected_measured_profile_names_the_cpu_anchors_it_leaves_out(tmp_path):
    folder = my_box(tmp_path / "profiles")
    p = run_cli(["run", "-k", "zzzz_matches_nothing", "--out", str(tmp_path / "out")], env_with(str(folder)), tmp_path)
    assert "profile my-box (detected: my-box" in p.stdout, p.stdout + p.stderr
    note = next(line for line in p.stdout.splitlines() if line.startswith("lawbench: note: "))
    assert "also matches profile 'cpu': its " in note and "`lawbench run --profile cpu` runs them" in note
    assert int(note.split("its ")[1].split()[0]) > 0
    p = run_cli(["run", "--profile", "cpu", "-k", "zzzz_matches_nothing", "--out", str(tmp_path / "out")],
                env_with(str(folder)), tmp_path)
    assert "lawbench: note" not in p.stdout  # asked for by name: nothing to point out


def test_a_folder_that_is_not_there_is_named(tmp_path):
    missing = tmp_path / "nope"
    p = run_cli(["check"], env_with(f"{my_box(tmp_path / 'ok')}{os.pathsep}{missing}"), tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert f"{missing}: hardware-profile folder does not exist or is not a folder" in p.stderr
    # the user's own setting, unlike a third-party plugin's folder, is never set aside with a warning:
    # a typo in it would quietly run another profile
    for argv in (["profiles"], ["run", "-k", "zzzz_matches_nothing", "--out", str(tmp_path / "out")]):
        p = run_cli(argv, env_with(str(missing)), tmp_path)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stdout + p.stderr
        assert f"LAWBENCH_PROFILE_DIRS: {missing}: hardware-profile folder does not exist" in p.stderr


def test_a_folder_named_twice_is_read_once_and_a_builtin_id_is_refused(tmp_path):
    folder = my_box(tmp_path / "profiles")
    p = run_cli(["check"], env_with(f"{folder}{os.pathsep}{folder}"), tmp_path)
    assert p.returncode == 0 and "6 profiles" in p.stdout, p.stdout + p.stderr
    (folder / "my-box.toml").write_text(CPU_TOML.read_text(encoding="utf-8"), encoding="utf-8")  # id "cpu", the built-in's
    p = run_cli(["profiles"], env_with(str(folder)), tmp_path)
    assert p.returncode == 2 and "profile id 'cpu' is already defined" in p.stderr, p.stderr


def test_measure_refuses_an_out_or_id_it_cannot_use_before_measuring(tmp_path):
    """Checked before the measurement, not after it: a traceback used to end a finished measure."""
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    cases = [(["--out", str(tmp_path / "afile" / "x.toml")], f"its folder {tmp_path / 'afile'}: it is a file, not a folder"),
             (["--out", str(tmp_path)], f"--out {tmp_path} is a folder; give the profile's file path"),
             (["--id", "cpu"], "profile id 'cpu' is already a profile")]
    for extra, words in cases:
        p = run_cli(["profiles", "measure", "--size-mb", "256", "--repeats", "1", *extra], None, tmp_path)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stdout + p.stderr
        assert words in p.stderr and "RAM read bandwidth" not in p.stdout, p.stderr
