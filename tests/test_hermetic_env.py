"""The suite does not depend on the machine it runs on (issue 35): a slice of it runs again in a
subprocess pytest on a stranger's machine, as unlike this one as a newcomer's may be —

- a time zone whose date is not UTC's right now (UTC+14 or UTC-12, whichever differs at this hour),
  so a day counted in local time where the record counts in UTC turns the test red at any hour;
- a locale that is not UTF-8 (``LC_ALL=C`` with ``PYTHONUTF8=0``: Python 3.11 would otherwise
  switch itself to UTF-8 mode under the C locale and hide it), so a file opened without
  ``encoding=`` reads the repository's "±", "α" and "—" as ASCII and fails;
- umask 077, a fresh HOME (no dotfiles, no user pip configuration) and an XDG_CACHE_HOME of its own,
  where a killed run left its box lock;
- LAWBENCH_* settings left in the developer's shell that change what lawbench does.

The slice is picked for what it touches: dates (the gate's acknowledgements, a weekly's slice, the
stale check, propose's default), the repository's non-ASCII text files (README, docs, anchors,
profiles) and lawbench's words with non-ASCII in them, and the cache's place. It runs with the
pytest of this suite, so the slice's own conftest applies exactly as in `nox -s tests`.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]

# Fast, non-serial, no llama.cpp: about 30 s on this project's 2-core machine.
SLICE = [
    "tests/test_hermetic_env.py::test_propose_counts_its_30_days_from_the_gate_s_day",
    "tests/test_hermetic_env.py::test_the_cache_is_where_the_environment_says",
    "tests/test_hermetic_env.py::test_a_terminal_that_is_not_utf8_gets_escapes_not_a_traceback",
    # dates: acknowledgements and their expiry, drift, the stale check, this week's slice
    "tests/test_gate.py",
    "tests/test_gate_acks.py",
    "tests/test_stale.py",
    "tests/test_weekly_slices.py::test_the_week_count_rotates_through_every_slice_across_a_new_year",
    "tests/test_weekly_slices.py::test_run_weekly_runs_this_weeks_slice_or_the_one_named",
    # the repository's non-ASCII text (docs, anchors, profiles, sources) and lawbench's words
    "tests/test_registry.py",
    "tests/test_profiles.py::test_core_names_no_law_in_a_profile",
    "tests/test_bad_input_data.py::test_a_number_no_profile_may_hold[negative CPU-attention k]",
    "tests/test_bad_input_stranger_text.py::test_baseline_show_prints_a_stranger_s_gate_literally",
    "tests/test_bad_input_stranger_text.py::test_the_html_report_of_a_stranger_s_record_is_escaped_cut_and_prompt[run]",
]
# What a developer's shell may hold; tests/conftest.py must drop each (a test that needs one sets it).
LEFT_IN_THE_SHELL = {
    "LAWBENCH_PROFILE_DIRS": "/nonexistent/profiles",  # a missing folder: every command exits 2
    "LAWBENCH_LLAMA_DIR": "/nonexistent/llama.cpp/build/bin",
    "LAWBENCH_OUT": "/nonexistent/out",
    "LAWBENCH_GPU_DETECT": "nvidia-smi",
    "LAWBENCH_DISABLE_PLUGIN_AUTOLOAD": "1",
}


def _zone_whose_date_is_not_utc_s(now: dt.datetime) -> str:
    """Kiritimati (UTC+14) is a day ahead from 10:00 UTC, Etc/GMT+12 (UTC-12) a day behind until
    12:00 UTC: an hour's margin either side of 10:30."""
    return "Pacific/Kiritimati" if now.hour >= 11 else "Etc/GMT+12"


# Dropped from this process's environment: the stranger has their own. LAWBENCH_CACHE too: the
# slice runs on a fresh cache under the fresh HOME, never on this machine's (so this module needs
# no serial pass: no box lock is shared; tests/test_suite_passes.py).
NOT_THE_STRANGER_S = ("LAWBENCH_", "PYTEST_", "XDG_", "LC_", "PYTHONUTF8", "PYTHONIOENCODING")


def stranger_env(home: Path, tz: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(NOT_THE_STRANGER_S)}
    env.update(LEFT_IN_THE_SHELL)
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / "xdg-cache"), TZ=tz, LC_ALL="C", LANG="C",
               PYTHONUTF8="0")
    return env


def test_a_slice_of_the_suite_passes_on_a_stranger_s_machine(tmp_path):
    tz = _zone_whose_date_is_not_utc_s(dt.datetime.now(dt.timezone.utc))
    home = tmp_path / "home"
    home.mkdir()
    env = stranger_env(home, tz)
    # A cache that was there before: what a lawbench killed mid-run leaves (a box lock and its
    # holder, a dead PID's), and a ~/.cache/lawbench that XDG_CACHE_HOME now leaves aside.
    locks = home / "xdg-cache" / "lawbench" / "locks"
    locks.mkdir(parents=True)
    (locks / "lawbench.lock").write_text("", encoding="utf-8")
    (locks / "lawbench.holder.json").write_text('{"pid": 999999999, "cmd": "lawbench run", "since": 0}',
                                                encoding="utf-8")
    (home / ".cache" / "lawbench").mkdir(parents=True)
    (home / ".cache" / "lawbench" / "not-a-folder").write_text("x", encoding="utf-8")
    # The setup itself can expose what it is meant to: another day, an ASCII locale, the umask.
    probe = subprocess.run(
        [sys.executable, "-c", "import datetime as d, locale, os, sys; "
         "print(d.date.today().isoformat(), d.datetime.now(d.timezone.utc).date().isoformat(), "
         "locale.getpreferredencoding(False), sys.flags.utf8_mode, oct(os.umask(0)))"],
        env=env, capture_output=True, text=True, encoding="utf-8", preexec_fn=lambda: os.umask(0o077), check=True)
    local_day, utc_day, encoding, utf8_mode, umask = probe.stdout.split()
    assert local_day != utc_day and utf8_mode == "0" and umask == "0o77", probe.stdout
    assert encoding.lower() in ("ansi_x3.4-1968", "ascii", "us-ascii"), probe.stdout

    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                           "--basetemp", str(tmp_path / "basetemp"), "-m", "not serial", *SLICE],
                          cwd=ROOT, env=env, capture_output=True, text=True, encoding="utf-8", errors="replace",
                          preexec_fn=lambda: os.umask(0o077), timeout=600)
    took = time.monotonic() - began
    assert done.returncode == 0, f"under TZ={tz}, LC_ALL=C, umask 077, HOME={home}:\n" + done.stdout[-6000:]
    assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-2000:]
    assert "deselected" not in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]  # all of it ran
    assert [p.name for p in (home / ".cache").rglob("*")] == ["lawbench", "not-a-folder"], \
        f"something wrote ~/.cache where XDG_CACHE_HOME was set: {list((home / '.cache').rglob('*'))[:5]}"
    assert took < 300, f"the slice took {took:.0f} s: keep it small (about 30 s on a quiet 2-core machine)"


# ------------------------------------------------------------------ in the slice (and in the suite)


def test_propose_counts_its_30_days_from_the_gate_s_day(tmp_path):
    """The gate counts an acknowledgement's days in UTC (core.history.gate.today); `baseline propose`
    used the proposer's local date, a day off for half of each day east or west of Greenwich."""
    from lawbench.core.models.gate import GateNews, GateVerdict
    from lawbench.core.models.run_record import RunRecord

    news = GateNews(anchor_id="law4.cpu.gone", kind="turned", why="±25 % — α turned")
    record = RunRecord(profile="cpu", gate=GateVerdict(verdict="red", profile="cpu", fingerprint="f", engine="e",
                                                       alpha=0.001, news=[news]))
    path = tmp_path / "night.json"
    path.write_text(record.model_dump_json(), encoding="utf-8")
    before = dt.datetime.now(dt.timezone.utc).date()
    done = subprocess.run([sys.executable, "-m", "lawbench.core.commands.main", "baseline", "propose", str(path),
                           "--who", "reviewer"], capture_output=True, text=True, encoding="utf-8", timeout=120)
    after = dt.datetime.now(dt.timezone.utc).date()
    assert done.returncode == 0, done.stderr
    untils = {line.split("=", 1)[1].strip() for line in done.stdout.splitlines() if line.startswith("until =")}
    assert untils and untils <= {(d + dt.timedelta(days=30)).isoformat() for d in (before, after)}, \
        (untils, before, time.tzname)


def test_a_llama_dir_given_on_the_command_line_reaches_the_engine_tests(monkeypatch, tmp_path):
    """The scrub drops LAWBENCH_LLAMA_DIR from the shell; ``pytest --lawbench-llama-dir DIR`` (a GPU
    runner's CUDA build) sets it again, resolved, for the engine tests (tests/conftest.py). Without
    the option nothing is set, so the tests take the cached CPU build."""
    import conftest

    monkeypatch.delenv("LAWBENCH_LLAMA_DIR", raising=False)
    conftest.pytest_configure(SimpleNamespace(getoption=lambda name, default=None: None))
    assert "LAWBENCH_LLAMA_DIR" not in os.environ
    monkeypatch.chdir(tmp_path)
    conftest.pytest_configure(SimpleNamespace(
        getoption=lambda name, default=None: "bin" if name == "lawbench_llama_dir" else default))
    assert os.environ["LAWBENCH_LLAMA_DIR"] == str(tmp_path / "bin")


def test_the_cache_is_where_the_environment_says(tmp_path, monkeypatch):
    """$LAWBENCH_CACHE, else $XDG_CACHE_HOME/lawbench (an absolute one, as the XDG specification
    says), else ~/.cache/lawbench."""
    from lawbench.core.paths import cache_root

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LAWBENCH_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_root() == tmp_path / "home" / ".cache" / "lawbench"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored
    assert cache_root() == tmp_path / "home" / ".cache" / "lawbench"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "lawbench"
    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"


def test_a_terminal_that_is_not_utf8_gets_escapes_not_a_traceback(tmp_path):
    """`lawbench baseline show` prints a record's words as they are ("—", "±", an emoji); on a
    terminal whose locale is ASCII it ended in UnicodeEncodeError. Now each such character is
    escaped and the command does its work. PYTHONIOENCODING (which tests/conftest.py sets for the
    suite's children) is dropped here: this is the terminal's own encoding."""
    from lawbench.core.models.gate import GateNews, GateVerdict
    from lawbench.core.models.run_record import RunRecord

    news = GateNews(anchor_id="law4.cpu.l15.syn-100m-q4_0", kind="turned", why="decode time ±25 % — α off")
    record = RunRecord(profile="cpu", gate=GateVerdict(verdict="red", profile="cpu", fingerprint="f", engine="e",
                                                       alpha=0.001, news=[news]))
    path = tmp_path / "night.json"
    path.write_text(record.model_dump_json(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "PYTHONUTF8")}
    env.update(LC_ALL="C", PYTHONUTF8="0")
    done = subprocess.run([sys.executable, "-m", "lawbench.core.commands.main", "baseline", "show", str(path)],
                          capture_output=True, env=env, timeout=120)
    out, err = done.stdout.decode("ascii"), done.stderr.decode("ascii")  # ASCII only, as its locale asks
    assert done.returncode == 0 and "Traceback" not in err, err
    assert "\\xb125 % \\u2014 \\u03b1 off" in out, out
    # the same command on a UTF-8 terminal: the characters themselves
    env.update(LC_ALL="C.UTF-8", PYTHONUTF8="1")
    utf8 = subprocess.run([sys.executable, "-m", "lawbench.core.commands.main", "baseline", "show", str(path)],
                          capture_output=True, env=env, timeout=120)
    assert utf8.returncode == 0 and "±25 % — α off" in utf8.stdout.decode("utf-8"), utf8.stderr
    assert json.loads(path.read_text(encoding="utf-8"))["gate"]["news"][0]["why"] == news.why  # untouched
