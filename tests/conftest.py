"""Shared fixtures. Engine/model fixtures live next to the tests that use them."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["lawbench.testing"]

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def dummy_site(tmp_path_factory) -> Path:
    """The third-party plugin tests/plugins/lawbench-dummy, really pip-installed into a folder."""
    site = tmp_path_factory.mktemp("site")
    src = HERE / "plugins" / "lawbench-dummy"
    build = tmp_path_factory.mktemp("build")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(src)],
        capture_output=True, text=True, cwd=build, env={**os.environ, "PIP_NO_CACHE_DIR": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (site / "lawbench_dummy" / "law.py").is_file()
    return site


@pytest.fixture
def cli_env(dummy_site, tmp_path) -> dict:
    """Environment for running the real `lawbench` console script with the dummy plugin installed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(dummy_site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("LAWBENCH_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("GITHUB_STEP_SUMMARY", None)
    env["LAWBENCH_CACHE"] = str(tmp_path / "cache")
    return env


def run_cli(args, env, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lawbench.core.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)
