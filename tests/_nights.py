"""Real nights of the cpu box through the nightly gate, the way the workflows run them (shared by
tests/test_nightly_gate.py and tests/test_nightly_rates.py): the box's job (scripts/nightly_runner.sh
through a stand-in for `nox -s anchors`, which runs the session's own two commands), then the
collect step (scripts/nightly_collect.sh) filing its records on the data branch folder that the
next night is judged against. The engine is the real llama.cpp build; faults are planted by a
--llama-dir wrapper around the real llama-bench (tests/standin/planted_llama_bench.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest
from standin.planted_llama_bench import make_wrapper

from lawbench.core.commands.profiles import runner_matrix
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.models.gate import RED_NEWS
from lawbench.core.paths import cache_root

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


class Nights:
    def __init__(self, tmp: Path, llama_bin: Path):
        self.tmp = tmp
        (tmp / "scripts").symlink_to(ROOT / "scripts")  # the steps run in the checkout's root
        # scripts/nightly_data.sh's word for data/, which the collect step below fills night by night
        (tmp / "data.fetch").write_text("fetched (the collect step's own folder in this test)\n", encoding="utf-8")
        self.wrapper = make_wrapper(tmp / "llama", llama_bin)
        nox = tmp / "nox"
        nox.write_text("#!/bin/bash\n# stand-in for `nox -s anchors -- ARGS`: the session's own two commands\n"
                       '[ "$1 $2 $3" = "-s anchors --" ] || { echo "unexpected nox call: $*" >&2; exit 3; }\n'
                       f'"{BIN}/lawbench" check && exec "{BIN}/lawbench" run "${{@:4}}"\n', encoding="utf-8")
        nox.chmod(0o755)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_"))}
        self.env.update(NOX=str(nox), PATH=f"{BIN}:{self.env.get('PATH', '/usr/bin:/bin')}",
                        LAWBENCH_CACHE=str(cache_root()))  # the machine's own, wherever it keeps it
        matrix = {job["box"]: job for job in runner_matrix(load_profiles())["include"]}
        assert set(matrix) == {"cpu", "ref-desktop"}
        # The cpu box's job as the workflow runs it (its nightly cadence and window); -k picks two
        # cheap anchors of that cadence.
        self.plan = matrix["cpu"]["plan"]
        self.n = 0
        self.records: dict[int, Path] = {}
        self.done: dict[int, Night] = {}  # each night as it ended, by number

    def run(self, planted: dict, select: str, *extra: str) -> Night:
        """One night of the cpu box, then the collect step."""
        from _nightly_artifacts import fetched

        from lawbench.core.record.reports import git_commit

        self.n += 1
        (self.wrapper / "planted.json").write_text(json.dumps(planted), encoding="utf-8")
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
                             capture_output=True, text=True, timeout=1800, encoding="utf-8")
        assert "Traceback" not in job.stdout + job.stderr, job.stdout[-3000:] + job.stderr[-3000:]
        self.records[self.n] = out / "cpu" / "run.json"  # where the job left this night's record
        record = json.loads(self.records[self.n].read_text(encoding="utf-8"))
        fetched(tonight, out.name, workflow_run, head, created)
        # the collect step: tonight's artifacts are the job's out folder; ref-desktop left none
        collect = subprocess.run(["bash", "scripts/nightly_collect.sh", "data", str(tonight), f"site-{self.n}",
                                  "quarantine"], cwd=self.tmp, env=env, capture_output=True, text=True, timeout=600, encoding="utf-8")
        assert collect.returncode == 0, collect.stdout[-3000:] + collect.stderr[-3000:]
        assert (self.tmp / "data" / "runs" / "cpu" / f"{record['run_id']}.json").is_file()
        assert (self.tmp / f"site-{self.n}" / "index.html").is_file()
        self.done[self.n] = Night(job.returncode, record, summary.read_text(encoding="utf-8"), job.stdout)
        return self.done[self.n]


def red(record: dict) -> dict[str, str]:
    """The night's red news by anchor: the gate's own rule (GateNews.red), not a list of its own."""
    return {n["anchor_id"]: n["kind"] for n in record["gate"]["news"]
            if n["acknowledged_until"] is None and n["kind"] in RED_NEWS}


def verdicts(record: dict) -> dict[str, str]:
    return {r["anchor_id"]: r["verdict"] for r in record["results"]}


@dataclass
class Night:
    rc: int  # the job's exit status
    record: dict
    summary: str  # the step summary the job wrote
    stdout: str  # what the job printed


def skip_where_out_of_scope(record: dict, anchor_id: str) -> None:
    """A story that needs ``anchor_id`` measured is skipped, naming the cache, where Law 4's scope
    rule makes it a SKIP on this CPU, as it should: a last-level cache that holds the model's
    weights (a 480 MiB L3 here, 2026-12-05) is outside what the law prices, so nothing planted on
    its rates could show."""
    [hit] = [r for r in record["results"] if r["anchor_id"] == anchor_id]
    scope = (hit.get("detail") or {}).get("out_of_scope")
    if hit["verdict"] == "SKIP" and scope:
        pytest.skip(f"{anchor_id} is outside Law 4's scope on this CPU ({scope.get('rule')}: a last-level cache of "
                    f"{scope.get('llc_bytes', 0) / 2**20:.0f} MiB holds its weights): {hit['reason']}")
