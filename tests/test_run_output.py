"""A normal run prints what a person needs and nothing odd; the repository works under pytest
however lawbench is installed."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import HERE, pip_install_into, run_cli

ROOT = HERE.parent


def test_a_run_prints_no_warnings_and_no_odd_paths(cli_env, tmp_path):
    out = tmp_path / "out"
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", str(out), "--no-history"], cli_env, tmp_path)
    text = (p.stdout + p.stderr).replace(str(tmp_path), "TMP")  # its name holds "warnings"
    assert p.returncode == 1, text[-3000:]  # dummy.sum-fail is a real FAIL
    assert "dummy.sum-pass" in text and "run record:" in text
    for odd in ("Warning", "warning", "configfile", os.devnull, "rootdir", "Traceback"):
        assert odd not in text, f"{odd!r} in a normal run's output:\n{text[-3000:]}"


def test_the_run_context_is_built_once(cli_env, tmp_path):
    """The CLI hands its RunContext to pytest: the machine is fingerprinted once per run."""
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(
        "import lawbench.core.run.session as s\n"
        "_init = s.RunContext.__init__\n"
        "def counted(self, *a, **k):\n"
        "    print('RunContext built', flush=True)\n"
        "    _init(self, *a, **k)\n"
        "s.RunContext.__init__ = counted\n", encoding="utf-8")
    env = dict(cli_env, PYTHONPATH=os.pathsep.join([str(probe), cli_env["PYTHONPATH"]]))
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", str(tmp_path / "out"), "--no-history"],
                env, tmp_path)
    assert p.stdout.count("RunContext built") == 1, p.stdout[-2000:] + p.stderr[-2000:]


def test_python_m_pytest_from_the_repository_root_with_a_regular_install(tmp_path):
    """Installed as a wheel (not editable), the repository root must not shadow the package."""
    site = pip_install_into(ROOT, tmp_path / "site", tmp_path)
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run([sys.executable, "-c", "import lawbench.core.commands.main, lawbench; print(lawbench.__file__)"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip().startswith(str(site)), where.stdout
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/test_verdicts.py", "tests/test_evaluate.py"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, encoding="utf-8")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert " passed" in p.stdout


@pytest.mark.parametrize("extra", [["-k", "and or ("], ["--", "--collect-only"]])
def test_a_run_that_measures_nothing_leaves_no_record(cli_env, tmp_path, extra):
    """The history is append-only: an unparsable -k or a collect-only pass must not add a 'run'."""
    out = tmp_path / "out"
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", str(out), *extra], cli_env, tmp_path)
    assert "Traceback" not in p.stdout + p.stderr
    assert not (out / "run.json").exists() and not (out / "history.sqlite").exists()
    if extra[0] == "-k":
        assert p.returncode == 2
