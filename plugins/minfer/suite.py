"""The engine's own test suite as a census: passed / failed / ignored (seed 002: "suite 167/0/3").

The command in the anchor's case.command_env (docs/minfer-contract.md §10; e.g. a wrapper that runs
`cargo test --release` in the minfer checkout) runs the whole suite once. Rust's test harness
(libtest) prints one summary line per test binary, on stdout:

    test result: ok. 167 passed; 0 failed; 3 ignored; 0 measured; 0 filtered out; finished in 8.01s

and cargo runs one binary after another (unit tests, each integration test, doc-tests), so the
suite's counts are the sums over every such line. cargo exits 101 when a test failed: that is a
reading (failed > 0), not an engine error. No summary line at all is an ERROR: nothing was counted.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from lawbench import Census, EngineError
from lawbench.plugins.minfer.case import Case
from lawbench.plugins.minfer.engine import child_env, run_engine

CARGO_TEST_FAILED = 101  # cargo test's exit status when a test failed (a compile error is also 101)
_SUMMARY = re.compile(r"^test result: (?P<result>ok|FAILED)\. (?P<passed>\d+) passed; (?P<failed>\d+) failed; "
                      r"(?P<ignored>\d+) ignored; (?P<measured>\d+) measured; (?P<filtered>\d+) filtered out")


def suite_counts(stdout: str) -> dict[str, int]:
    """passed / failed / ignored / measured / filtered out summed over libtest's summary lines, and
    how many test binaries printed one ("binaries"); {} when none did."""
    counts = {"passed": 0, "failed": 0, "ignored": 0, "measured": 0, "filtered out": 0, "binaries": 0}
    for line in stdout.splitlines():
        m = _SUMMARY.match(line.strip())
        if m is None:
            continue
        counts["binaries"] += 1
        for key in ("passed", "failed", "ignored", "measured"):
            counts[key] += int(m.group(key))
        counts["filtered out"] += int(m.group("filtered"))
    return counts if counts["binaries"] else {}


def suite_census(argv: list[str], case: Case, revision: Optional[str]) -> Census:
    what = f"test suite ({case.command_env})"
    env = child_env(case.env, case.unset_env)
    done = run_engine(argv, env, case.timeout_s, what=what, exit_ok=(0, CARGO_TEST_FAILED))
    counts = suite_counts(done.stdout)
    if not counts:
        raise EngineError(f"{what} exited {done.returncode} and printed no libtest summary line ('test result: "
                          "ok. N passed; N failed; N ignored; …') on stdout: nothing was counted", log=done.log())
    environment: dict[str, Any] = {"command": argv, "env": case.env, "unset_env": case.unset_env,
                                   "exit_status": done.returncode, "duration_s": round(done.duration_s, 3),
                                   "engine_revision": revision}
    return Census(counts=counts, log=done.log(), environment=environment)
