"""Every deployed profile measures its hardware nightly (issue 30 item 10): on cpu-ddr4, a measured
register claim runs every night when its worst case still fits the nightly window, so the weekly
holds only those that do not fit. Read from the real `lawbench plan`, as a runner owner reads it."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
TOTAL = re.compile(r"worst case (\d+) min, typical .*; window (\d+) min: (fits|does not fit)")


def _plan(profile: str, cadence: str) -> tuple[list[tuple[str, str, float]], str]:
    env = dict(os.environ, COLUMNS="240")
    done = subprocess.run([str(BIN / "lawbench"), "plan", "--profile", profile, "--cadence", cadence],
                          capture_output=True, text=True, env=env, timeout=120, encoding="utf-8")
    assert done.returncode == 0, done.stdout + done.stderr
    # columns found by their headings: a weekly's plan has a slice column the nightly's lacks
    lines = done.stdout.splitlines()
    heads = next([c.strip() for c in line.strip("┃").split("┃")] for line in lines if line.startswith("┃"))
    anchor, kind, worst = heads.index("anchor"), heads.index("kind"), heads.index("worst case (min)")
    cells = [[c.strip() for c in line.strip().strip("│").split("│")] for line in lines if line.startswith("│")]
    rows = [(c[anchor], c[kind], float(c[worst])) for c in cells if len(c) == len(heads)]
    return rows, done.stdout.strip().splitlines()[-1]


def test_cpu_ddr4_measures_a_register_claim_nightly_and_no_weekly_one_would_still_fit():
    nightly, total = _plan("cpu-ddr4", "nightly")
    # its hardware claims are Law 4's measured rows (anchors/law4/cpu-ddr4.toml); law2's tensor
    # anchors and the predictions every PR runs measure no speed of this box
    measured = [a for a, k, _ in nightly if a.startswith("law4.") and k != "prediction"]
    assert measured, "cpu-ddr4's nightly measures no register claim on its hardware"
    # `lawbench plan` totals the window from a timed-out run's --deadline, so the nightly must fit;
    # the window is the profile's (hardware_profiles/cpu-ddr4.toml), never widened here
    fit = TOTAL.search(total)
    assert fit and fit[3] == "fits", total
    worst, window = int(fit[1]), int(fit[2])
    weekly, _ = _plan("cpu-ddr4", "weekly")
    movable = [a for a, k, minutes in weekly if k != "prediction" and worst + minutes <= window]
    assert not movable, f"these weekly anchors fit cpu-ddr4's nightly ({worst} of {window} min used): {movable}"
