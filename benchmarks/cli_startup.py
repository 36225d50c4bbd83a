"""What one `lawbench` command costs before it does anything: the wall time of a process that loads
every law and answers at once, and the modules it imported.

    python benchmarks/cli_startup.py                          # this interpreter's lawbench
    python benchmarks/cli_startup.py --python /tmp/a/bin/python --python /tmp/b/bin/python

Why it matters: the test suite starts about 1,100 such processes (the real console script, checked
as a user meets it), and a nightly collect starts a handful; each pays this cost on one core.
With two interpreters (say, two installs of two commits) the runs are interleaved A B B A …, so a
machine that slows down mid-run slows both alike. Prints, per interpreter and command, the median
and the spread (min–max) of --runs runs, and the modules `lawbench --help` leaves in sys.modules,
with the heavy third-party ones among them named.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = (("--help",), ("history", "--help"), ("laws",), ("check",))
# Third-party packages a command loads only when it needs them (numpy: the statistics and tensor
# arithmetic; gguf: a GGUF read; rich: a table printed; psutil / filelock: a process or a cache touched).
HEAVY = ("numpy", "gguf", "rich", "psutil", "filelock", "scipy", "yaml")
MODULES = ("import sys, runpy, json\nsys.argv = ['lawbench', '--help']\n"
           "try:\n    runpy.run_module('lawbench.core.commands.main', run_name='__main__')\n"
           "except SystemExit:\n    pass\n"
           "sys.stderr.write(json.dumps(sorted(sys.modules)))\n")


def one_run(python: str, args: tuple[str, ...], cwd: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([python, "-m", "lawbench.core.commands.main", *args], cwd=cwd,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    took = time.perf_counter() - started
    if done.returncode not in (0, 2):  # `check` is 2 where a plugin's data is bad: still a start-up
        sys.exit(f"{python} -m lawbench {' '.join(args)} exited {done.returncode}")
    return took


def modules(python: str, cwd: str) -> list[str]:
    done = subprocess.run([python, "-c", MODULES], cwd=cwd, capture_output=True, text=True, check=False)
    return json.loads(done.stderr.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", action="append", help="an interpreter with lawbench installed "
                    "(repeatable; default: this one)")
    ap.add_argument("--runs", type=int, default=9, help="runs per interpreter and command (default 9)")
    args = ap.parse_args()
    pythons = args.python or [sys.executable]
    with tempfile.TemporaryDirectory() as cwd:  # not the checkout: its folders must not shadow the install
        times: dict[tuple[str, tuple[str, ...]], list[float]] = {}
        for i in range(args.runs):
            order = pythons if i % 2 == 0 else pythons[::-1]
            for python in order:
                for command in COMMANDS:
                    times.setdefault((python, command), []).append(one_run(python, command, cwd))
        for python in pythons:
            print(python)
            for command in COMMANDS:
                got = times[(python, command)]
                print(f"  lawbench {' '.join(command):14} median {statistics.median(got):.3f} s "
                      f"(min {min(got):.3f}, max {max(got):.3f}, {len(got)} runs)")
            loaded = modules(python, cwd)
            heavy = [h for h in HEAVY if h in loaded]
            print(f"  `lawbench --help` imports {len(loaded)} modules; heavy ones: {', '.join(heavy) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
