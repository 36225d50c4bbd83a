"""benchmarks/newcomer.py: its reading of what nox, lawbench and pytest print, on small inputs —
the lawbench and pytest lines come from the real tools here, the nox lines are nox's format."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from test_engine_build import EXTRAS_CMAKE, plant_sdist

from lawbench.core.engines.build import build_llamacpp
from lawbench.core.engines.tools import require_tool

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("newcomer", ROOT / "benchmarks" / "newcomer.py")
newcomer = importlib.util.module_from_spec(_spec)
sys.modules["newcomer"] = newcomer  # its dataclasses look their module up by name
_spec.loader.exec_module(newcomer)


def stamped(texts: list[str], step: float = 1.0) -> list[tuple[float, str]]:
    return [(i * step, t) for i, t in enumerate(texts)]


def test_an_anchors_phase_splits_into_setup_check_build_models_and_anchors():
    lines = [(0.0, "nox > Running session anchors"), (0.1, "nox > uv binary not found."),
             (0.1, "nox > Creating virtual environment (virtualenv) using python3 in .nox/anchors"),
             (1.2, "nox > python -m pip install '.[gpu,plots]'"),  # nox's own lines, as it printed them
             (27.8, "nox > python -m pip install --no-deps ./examples/lawbench-law2"),
             (40.0, "nox > lawbench check"), (44.0, "lawbench check: 212 anchors, no problems"),
             (50.0, "nox > lawbench run"), (60.0, "lawbench: configuring llama.cpp"),
             (300.0, "lawbench: llama.cpp b11434 (cpu) built in 240 s"),
             (330.0, "lawbench: model syn-25m-q4_0 ready in 12.5 s"),
             (400.0, "lawbench: added llama-server to the llama.cpp build in 90 s"),
             (420.0, "lawbench: model smollm2-135m-q4_1 ready in 7.5 s"),
             (600.0, "nox > Session anchors was successful.")]
    p = newcomer.where_it_went("anchors-cold", lines, 601.0, 0)
    assert (p.setup_s, p.check_s, p.run_s) == (40.0, 10.0, 551.0)
    assert p.build_s == 330.0 and p.built == ["llama.cpp", "llama-server"]
    assert p.models == {"syn-25m-q4_0": 12.5, "smollm2-135m-q4_1": 7.5} and p.models_s == 20.0
    assert p.anchors_s == 551.0 - 330.0 - 20.0
    text = newcomer.describe(p)
    assert "anchors-cold: 10 min 01.0 s (exit 0)" in text and "(llama.cpp, llama-server)" in text


def test_a_warm_phase_says_cached():
    lines = [(0.0, "nox > Running session anchors"), (5.0, "nox > lawbench check"),
             (9.0, "nox > lawbench run")]
    p = newcomer.where_it_went("anchors-warm", lines, 100.0, 1)
    assert p.build_s == 0 and p.run_s == 91.0 and p.anchors_s == 91.0
    assert "llama.cpp build                0.0 s  (cached)" in newcomer.describe(p)


def test_the_build_lines_it_reads_are_the_ones_the_builder_prints(tmp_path):
    plant_sdist(tmp_path, "4747.0.0", cmake_extra=EXTRAS_CMAKE, folders=("tools/imatrix", "tools/server"))
    said: list[str] = []
    llama = build_llamacpp("4747.0.0", cache_dir=tmp_path, jobs=2, progress=said.append)
    require_tool(llama, "llama-imatrix", progress=said.append)
    p = newcomer.where_it_went("anchors-cold", stamped([f"lawbench: {line}" for line in said]), 9.0, 0)
    assert p.built == ["llama.cpp", "llama-imatrix"]


def test_per_file_durations_come_from_pytests_own_lines(tmp_path):
    (tmp_path / "test_slow.py").write_text("import time\n\ndef test_a():\n    time.sleep(0.2)\n\n"
                                           "def test_b():\n    time.sleep(0.1)\n", encoding="utf-8")
    (tmp_path / "test_quick.py").write_text("def test_c():\n    pass\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "/dev/null",
                          "--rootdir", str(tmp_path), "--durations=0", "--durations-min=0", str(tmp_path)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120, encoding="utf-8")
    lines = [(0.0, "nox > Running session tests"), (3.0, "nox > pytest -q -ra")]
    lines += [(4.0, line) for line in out.stdout.splitlines()]
    p = newcomer.where_it_went("tests-cold", lines, 10.0, 0)
    assert list(p.per_file)[0] == "test_slow.py" and p.per_file["test_slow.py"] >= 0.3
    assert "test_quick.py" in p.per_file and p.summaries == ["3 passed"]
    assert p.run_s == 7.0 and "test_slow.py" in newcomer.describe(p)


def test_per_law_reads_the_run_record():
    record = {"results": [{"law": "law4", "duration_s": 2.5, "verdict": "PASS"},
                          {"law": "law4", "duration_s": 1.0, "verdict": "VOID"},
                          {"law": "law1", "duration_s": None, "verdict": "PASS"},
                          # an open finding's FAIL (exit 0) is named as one, a real FAIL stays FAIL
                          {"law": "law1", "duration_s": 0.5, "verdict": "FAIL",
                           "detail": {"open_finding": "Measured here (2026-12-01) …"}},
                          {"law": "law1", "duration_s": 0.5, "verdict": "FAIL", "detail": {}}]}
    assert newcomer.per_law(record) == {
        "law1": {"anchors": 3, "seconds": 1.0, "verdicts": {"PASS": 1, "open finding": 1, "FAIL": 1}},
        "law4": {"anchors": 2, "seconds": 3.5, "verdicts": {"PASS": 1, "VOID": 1}}}


def test_an_unknown_phase_is_refused_by_name(capsys):
    with pytest.raises(SystemExit) as exc:
        newcomer.main(["--only", "anchors-cold,tests-lukewarm"])
    assert exc.value.code == 2 and "tests-lukewarm not a phase" in capsys.readouterr().err


def test_lines_are_stamped_as_they_arrive_and_logged(tmp_path):
    code = "import sys, time; print('first', flush=True); time.sleep(0.5); print('second', file=sys.stderr)"
    lines, wall, rc = newcomer.run_timed([sys.executable, "-c", code], tmp_path, None, tmp_path / "x.log")
    assert rc == 0 and [t for _, t in lines] == ["first", "second"]
    assert lines[1][0] - lines[0][0] >= 0.4 and wall >= lines[1][0]
    assert (tmp_path / "x.log").read_text(encoding="utf-8").splitlines()[1].endswith("] second")
