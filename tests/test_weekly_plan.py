"""Every cadence fits its window, first part (issue 30 item 8): a weekly that selects nothing on a
profile is no job. cpu's nightly takes all of its anchors, so its weekly selected 0 and the job
exited 2 every Saturday with no record. Through the real `lawbench profiles runners --weekly` and
`lawbench plan`, on the repository's profiles and anchors."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def _lawbench(*args: str) -> str:
    done = subprocess.run([str(BIN / "lawbench"), *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, COLUMNS="240"), encoding="utf-8")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    return done.stdout


def _selected(profile: str, cadence: str) -> int:
    last = _lawbench("plan", "--profile", profile, "--cadence", cadence).strip().splitlines()[-1]
    m = re.search(r"cadence \w+: (\d+) anchors", last)
    assert m, last
    return int(m[1])


def test_a_weekly_job_holds_only_profiles_whose_weekly_selects_something():
    weekly = json.loads(_lawbench("profiles", "runners", "--weekly"))["include"]
    nightly = json.loads(_lawbench("profiles", "runners"))["include"]
    # the weekly runs the rest of a `nightly` nightly, everything after a `quick` one
    weekly_cadence = {e.split(":")[0]: "full" if e.split(":")[1] == "quick" else "weekly"
                      for job in nightly for e in job["plan"].split()}
    nightly_profiles = set(weekly_cadence)
    planned = {}
    for job in weekly:
        entries = [e.split(":") for e in job["plan"].split()]
        assert job["profile"].split() == [pid for pid, _, _ in entries]
        for pid, cadence, minutes in entries:
            planned[pid] = _selected(pid, cadence)
            assert int(minutes) * len(entries) <= job["timeout"]
    assert planned and all(n > 0 for n in planned.values()), planned
    left_out = nightly_profiles - set(planned)
    # each profile left out of the weekly is one whose weekly selects nothing (cpu, today)
    assert left_out and all(_selected(pid, weekly_cadence[pid]) == 0 for pid in left_out), left_out
