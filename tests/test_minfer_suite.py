"""minfer's own test suite as a census (seed 002: "suite 167/0/3"), plugins/minfer/suite.py.

There is no minfer checkout here; the suite command is tests/standin/suite_standin.py, which runs
real `cargo test` on a tiny real crate (tests/standin/suite_crate: 5 passed / 0 failed / 1 ignored
over three test binaries, one planted failure under SUITE_STANDIN_FAIL=1), so the parser reads
libtest's own summary lines, not a recording."""
from __future__ import annotations

import shlex
import shutil
import subprocess
import sys

import pytest
import standin
from test_minfer import gb10_profile, run

from lawbench.core.claims.loading import load_anchors
from lawbench.core.errors import DataError, EngineError
from lawbench.core.models import Verdict
from lawbench.core.record.census import census_problems
from lawbench.plugins.minfer.law import Minfer
from lawbench.plugins.minfer.suite import suite_counts

SUITE = standin.HERE / "suite_standin.py"
SUITE_ENV = "LAWBENCH_MINFER_SUITE_CMD"

def _cargo_runs() -> bool:
    """cargo on PATH that runs: a rustup proxy with no toolchain for this HOME does not."""
    if shutil.which("cargo") is None:
        return False
    try:
        return subprocess.run(["cargo", "--version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = pytest.mark.skipif(not _cargo_runs(), reason="no cargo that runs (none on PATH, or a rustup proxy "
                                                          "with no toolchain for this HOME): the suite stand-in "
                                                          "runs real cargo test")


@pytest.fixture(scope="module")
def anchor():
    anchors = {la.anchor.id: la.anchor for la in load_anchors(Minfer().anchor_files(), laws=["minfer"]).anchors}
    return anchors["minfer.r54.suite"]


@pytest.fixture
def suite(monkeypatch, tmp_path_factory):
    monkeypatch.setenv(SUITE_ENV, " ".join(shlex.quote(a) for a in (sys.executable, str(SUITE))))
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path_factory.getbasetemp() / "suite-target"))
    monkeypatch.delenv("SUITE_STANDIN_FAIL", raising=False)
    monkeypatch.delenv(standin.REVISION_ENV, raising=False)
    return monkeypatch


def counts(anchor) -> dict[str, int]:
    return Minfer().census(anchor, gb10_profile(), None).counts


def expecting(anchor, **exact: int):
    return anchor.model_copy(update={"census": anchor.census.model_copy(update={"exact": exact})})


def test_the_counts_are_summed_over_every_test_binary_of_real_cargo(suite, anchor):
    got = counts(anchor)
    assert {k: got[k] for k in ("passed", "failed", "ignored", "binaries")} == \
        {"passed": 5, "failed": 0, "ignored": 1, "binaries": 3}


def test_a_suite_of_the_expected_counts_passes_and_a_planted_failure_turns_it_red(suite, anchor):
    mine = expecting(anchor, passed=5, failed=0, ignored=1)
    assert run(mine).verdict == Verdict.PASS
    suite.setenv("SUITE_STANDIN_FAIL", "1")  # cargo exits 101: a reading, not an engine error
    result = run(mine)
    assert result.verdict == Verdict.FAIL
    assert census_problems(mine.census, counts(mine)) == ["passed: counted 4, expected exactly 5",
                                                          "failed: counted 1, expected exactly 0"]


def test_the_shipped_anchor_is_red_on_a_suite_that_is_not_minfers(suite, anchor):
    """The red-on-wrong test of the shipped anchor: 5/0/1 is not 167/0/3."""
    assert census_problems(anchor.census, counts(anchor)) == ["passed: counted 5, expected exactly 167",
                                                              "ignored: counted 1, expected exactly 3"]
    assert run(anchor).verdict == Verdict.FAIL


def test_the_suite_of_another_revision_skips(suite, anchor):
    suite.setenv(standin.REVISION_ENV, "r60")
    assert run(anchor, on_own_runner=False).verdict == Verdict.SKIP


def test_no_suite_command_is_a_skip_here_and_a_fail_on_the_gb10_runner_under_strict(suite, anchor):
    suite.delenv(SUITE_ENV)
    assert run(anchor, on_own_runner=False).verdict == Verdict.SKIP
    assert run(anchor, on_own_runner=True, strict=True).verdict == Verdict.FAIL


def test_a_command_that_prints_no_summary_counted_nothing(suite, anchor, tmp_path):
    script = tmp_path / "quiet.py"
    script.write_text("import json, os\nif os.environ.get('LAWBENCH_MINFER_PROBE') == 'revision':\n"
                      "    print(json.dumps({'minfer_revision': 'r54', 'minfer_contract': 1}))\n"
                      "else:\n    print('running 0 tests')\n", encoding="utf-8")
    suite.setenv(SUITE_ENV, f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    with pytest.raises(EngineError, match="no libtest summary line"):
        counts(anchor)
    assert suite_counts("running 3 tests\ntest a ... ok\n") == {}


def test_a_suite_case_names_its_command_and_is_a_census(anchor):
    bad = anchor.model_copy(update={"case": {k: v for k, v in anchor.case.items() if k != "command_env"}})
    with pytest.raises(DataError, match="command_env"):
        Minfer().check_anchor(bad)
