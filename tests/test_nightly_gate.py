"""Nights through the gate, the way the workflows run them: the box's job (scripts/nightly_runner.sh
through a stand-in for `nox -s anchors`, which runs the session's own two commands), then the
collect step (scripts/nightly_collect.sh) filing its records on the data branch folder that the
next night is judged against. The engine is the real llama.cpp build; faults are planted by a
--llama-dir wrapper around the real llama-bench (tests/standin/planted_llama_bench.py).

The ref-desktop box (gtx1060 + cpu-ddr4) has no runner here: it leaves no artifact, and the cpu
box's history and report are filed every night regardless.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from _engine_fixtures import llama  # noqa: F401  (the real build, a session fixture)
from lawbench.core.commands.profiles import runner_matrix
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.models.gate import AcknowledgedFile
from standin.planted_llama_bench import make_wrapper

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RATIO = "law4.cpu.l15.syn-100m-q4_0"  # syn-100m over syn-400m, both Q4_0 (L-15), arms interleaved
CENSUS = "law4.cpu.census.q4_0-repack"  # the CPU_REPACK load-log labels of a Q4_0 model

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("bash") is None, reason="the job logic is bash scripts")]


class Nights:
    def __init__(self, tmp: Path, llama_bin: Path):
        self.tmp = tmp
        (tmp / "scripts").symlink_to(ROOT / "scripts")  # the steps run in the checkout's root
        self.wrapper = make_wrapper(tmp / "llama", llama_bin)
        nox = tmp / "nox"
        nox.write_text("#!/bin/bash\n# stand-in for `nox -s anchors -- ARGS`: the session's own two commands\n"
                       '[ "$1 $2 $3" = "-s anchors --" ] || { echo "unexpected nox call: $*" >&2; exit 3; }\n'
                       f'"{BIN}/lawbench" check && exec "{BIN}/lawbench" run "${{@:4}}"\n')
        nox.chmod(0o755)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_"))}
        self.env.update(NOX=str(nox), PATH=f"{BIN}:{self.env.get('PATH', '/usr/bin:/bin')}",
                        LAWBENCH_CACHE=os.environ.get("LAWBENCH_CACHE", str(Path.home() / ".cache" / "lawbench")))
        matrix = {job["box"]: job for job in runner_matrix(load_profiles())["include"]}
        assert set(matrix) == {"cpu", "ref-desktop"}
        # The cpu box's job as the workflow runs it (its nightly cadence and window); -k picks two
        # cheap anchors of that cadence.
        self.plan = matrix["cpu"]["plan"]
        self.n = 0
        self.records: dict[int, Path] = {}

    def run(self, planted: dict, select: str, *extra: str) -> tuple[int, dict, str]:
        """One night of the cpu box, then the collect step; returns (job exit, record, step summary)."""
        from _nightly_artifacts import fetched

        from lawbench.core.record.reports import git_commit

        self.n += 1
        (self.wrapper / "planted.json").write_text(json.dumps(planted))
        # the job's out folder is its artifact, fetched into tonight-N/ (scripts/nightly_fetch.sh)
        workflow_run, head = str(700 + self.n), git_commit() or "0" * 40
        tonight, summary = self.tmp / f"tonight-{self.n}", self.tmp / f"summary-{self.n}.md"
        out = tonight / f"lawbench-cpu-{workflow_run}"
        env = dict(self.env, GITHUB_STEP_SUMMARY=str(summary))
        created = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        job = subprocess.run(["bash", "scripts/nightly_runner.sh", self.plan, "data", str(out), "-k", select,
                              "--llama-dir", str(self.wrapper), *extra], cwd=self.tmp,
                             env=dict(env, GITHUB_RUN_ID=workflow_run, GITHUB_RUN_ATTEMPT="1", GITHUB_JOB="anchors",
                                      LAWBENCH_BOX="cpu", GITHUB_SHA=head),
                             capture_output=True, text=True, timeout=1800)
        assert "Traceback" not in job.stdout + job.stderr, job.stdout[-3000:] + job.stderr[-3000:]
        self.records[self.n] = out / "cpu" / "run.json"  # where the job left this night's record
        record = json.loads(self.records[self.n].read_text())
        fetched(tonight, out.name, workflow_run, head, created)
        # the collect step: tonight's artifacts are the job's out folder; ref-desktop left none
        collect = subprocess.run(["bash", "scripts/nightly_collect.sh", "data", str(tonight), f"site-{self.n}",
                                  "quarantine"], cwd=self.tmp, env=env, capture_output=True, text=True, timeout=600)
        assert collect.returncode == 0, collect.stdout[-3000:] + collect.stderr[-3000:]
        assert (self.tmp / "data" / "runs" / "cpu" / f"{record['run_id']}.json").is_file()
        assert (self.tmp / f"site-{self.n}" / "index.html").is_file()
        return job.returncode, record, summary.read_text()


def red(record: dict) -> dict[str, str]:
    return {n["anchor_id"]: n["kind"] for n in record["gate"]["news"]
            if n["acknowledged_until"] is None and n["kind"] not in ("void-once", "recovered", "not-run")}


def verdicts(record: dict) -> dict[str, str]:
    return {r["anchor_id"]: r["verdict"] for r in record["results"]}


def test_nights_through_the_gate(llama, tmp_path):  # noqa: F811
    nights = Nights(tmp_path, llama.bin_dir)
    both = f"{CENSUS} or l15.syn-100m-q4_0"
    # One model 40 % slower: a slowdown of the whole format would be L-15's per-format η, which the
    # cpu profile calibrates in the run (tests/test_cpu_planted_faults.py shows it cancels).
    from lawbench.core.store.real import ModelStore

    slow = {"slow_files": {ModelStore().path("syn-100m-q4_0").name: 0.6}}

    rc, first, summary = nights.run({}, both)
    assert verdicts(first)[CENSUS] == "PASS" and verdicts(first)[RATIO] in ("PASS", "VOID"), first["results"]
    assert (rc, first["gate"]["verdict"]) == (0, "green") and "starts its baseline" in first["gate"]["new_baseline"]
    assert "gate GREEN on cpu" in summary  # the morning view leads the step summary

    rc, second, _ = nights.run({}, both)
    assert (rc, second["gate"]["verdict"], red(second)) == (0, "green", {})
    assert second["gate"]["baseline_run_id"] == first["run_id"]

    rc, third, summary = nights.run(slow, both)  # syn-100m-q4_0 40 % slower
    assert (rc, third["gate"]["verdict"]) == (1, "red") and red(third) == {RATIO: "turned"}, third["gate"]
    assert verdicts(third)[RATIO] == "FAIL"  # the absolute verdict stays in the record
    assert "gate RED on cpu" in summary and RATIO in summary

    rc, fourth, _ = nights.run({"drop": ["repack"]}, CENSUS)  # the load log loses the CPU_REPACK labels
    assert rc == 1 and red(fourth) == {CENSUS: "lost-label"}, fourth["gate"]

    # The third night's red, accepted by a person: the proposal, reviewed, is the acknowledged file.
    proposal = subprocess.run([str(BIN / "lawbench"), "baseline", "propose", str(nights.records[3]),
                               "--who", "reviewer", "--until", "2099-01-01"], capture_output=True, text=True,
                              env=nights.env, timeout=120)
    assert proposal.returncode == 0, proposal.stderr
    reviewed = proposal.stdout.replace("TO REVIEW: ", "reviewed: syn-100m-q4_0 slowdown planted by the test; ")
    ack = AcknowledgedFile.model_validate(tomllib.loads(reviewed))
    assert [a.anchor for a in ack.acknowledged] == [RATIO]
    (tmp_path / "cpu.toml").write_text(reviewed)
    rc, fifth, summary = nights.run(slow, both, "--acknowledged", str(tmp_path / "cpu.toml"))
    assert (rc, fifth["gate"]["verdict"], red(fifth)) == (0, "green", {}), fifth["gate"]
    assert verdicts(fifth)[RATIO] == "FAIL" and fifth["gate"]["acknowledged"] == [RATIO]
    assert "acknowledged until 2099-01-01 (reviewer)" in summary  # the red is shown, with its date

    filed = sorted(p.stem for p in (tmp_path / "data" / "runs").rglob("*.json"))
    runs = sorted(r["run_id"] for r in (first, second, third, fourth, fifth))
    assert [f for f in filed if not f.endswith(".binding")] == runs  # no box waited
    assert [f for f in filed if f.endswith(".binding")] == [f"{r}.binding" for r in runs]  # each bound
