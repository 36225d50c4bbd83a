"""examples/lawbench-law2, the outside contributor's package of Law 2, really pip-installed.

It is found through the `lawbench` entry-point group like any third-party law: `lawbench laws`
names its distribution, `lawbench check` validates its anchors and counts the inventory lines they
cite, and its prediction runs from the installed copy.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import pip_install_into, run_cli

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "lawbench-law2"


@pytest.fixture(scope="module")
def law2_env(tmp_path_factory) -> dict:
    site = pip_install_into(EXAMPLE, tmp_path_factory.mktemp("law2-site"), tmp_path_factory.mktemp("law2-build"))
    assert (site / "lawbench_law2" / "anchors" / "law2.toml").is_file()  # package data travelled
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("LAWBENCH_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("GITHUB_STEP_SUMMARY", None)
    env["LAWBENCH_CACHE"] = str(tmp_path_factory.mktemp("law2-cache"))
    return env


def test_lawbench_laws_lists_law2_from_its_own_distribution(law2_env, tmp_path):
    proc = run_cli(["laws"], law2_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("law2 "))
    assert "distribution lawbench-law2 0.1.0" in line and "entry point law2 = lawbench_law2.plugin" in line
    assert "prediction" in line and "agreement" in line


def test_lawbench_check_passes_with_law2_and_counts_its_lines(law2_env, tmp_path):
    proc = run_cli(["check"], law2_env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok:") and " 0 missing" in proc.stdout


def test_the_installed_law_predicts_the_floor(law2_env, tmp_path):
    proc = run_cli(["run", "--profile", "cpu", "--law", "law2", "-k", "rel-mse-at-2-bits",
                    "--out", str(tmp_path / "out"), "--no-history"], law2_env, tmp_path)
    # The seed's 0.069 against D(R=2) = 0.0625 is an open finding: reported, not a failed build.
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "law2.seed.rel-mse-at-2-bits" in proc.stdout and "0.0625" in proc.stdout
