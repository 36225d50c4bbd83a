"""The parts under `lawbench run`'s truthful records, one at a time: the process-group runner on an
interrupt, the interrupted record, its permissions, its fallback, and the box lock's reach.

Interrupts are real signals sent to this process (from a timer thread) through lawbench's own
handler (signals.StopSignals), which turns SIGTERM into a KeyboardInterrupt naming it.
"""
from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from _engine_fixtures import alive, fake_llama, llama, synth_dir, tiny_f16, write_script  # noqa: F401
from lawbench.core.record import reports
from lawbench.core.engines.bench import quantize, run_bench
from lawbench.core.engines.build_steps import _run_logged
from lawbench.core.history.store import History
from lawbench.core.errors import EngineInterrupted
from lawbench.core.models import Measurement, Result, Sample, Verdict
from lawbench.core.record.reports import RunRecord, read_json, write_fallback, write_json
from lawbench.core.laws.resources import Resources
from lawbench.core.run import signals

RECORD = ('{"model_filename": "m.gguf", "n_prompt": 0, "n_gen": 16, "n_depth": 0, '
          '"samples_ts": [9.0, 11.0, 10.4]}')


def signal_when(path: Path, sig: int = signal.SIGTERM) -> threading.Thread:
    """Send `sig` to this process once `path` exists (the stand-in has started its hang)."""
    def watch():
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), sig)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def stop():
    handlers = signals.install()  # the process's one set (lawbench.core.run.signals)
    try:
        yield handlers
    finally:
        signals.restore()


@pytest.fixture
def model(tmp_path) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")  # never read by the stand-in tools
    return path


# --------------------------------------------------------------------------- the runner


def test_interrupted_bench_ends_its_group_and_keeps_finished_tests(tmp_path, model, stop):
    # a stand-in llama-bench: one finished test (made-up numbers), then a hang with a child
    fake = fake_llama(tmp_path, f"""
        echo '{RECORD}'
        sleep 300 &
        echo "$$ $!" > {tmp_path}/pids.tmp; mv {tmp_path}/pids.tmp {tmp_path}/pids
        wait
    """)
    signal_when(tmp_path / "pids")
    with pytest.raises(EngineInterrupted) as info:
        run_bench(fake, model, repetitions=3, timeout_s=120)
    err = info.value
    assert err.signal_name == "SIGTERM" and stop.received == "SIGTERM"
    assert "interrupted by SIGTERM" in str(err) and "1 finished tests kept" in str(err)
    assert [s.value for s in err.samples] == [9.0, 11.0, 10.4]
    assert not any(alive(int(pid)) for pid in (tmp_path / "pids").read_text(encoding="utf-8").split())


@pytest.mark.integration
def test_real_llama_bench_is_ended_with_lawbench_and_its_finished_test_kept(llama, tiny_f16, tmp_path,
                                                                           stop):
    # The real llama-bench runs the asked-for test and prints it; then a second real llama-bench,
    # with repetitions enough for minutes, is still running when SIGTERM comes.
    wrapper = write_script(tmp_path / "llama-bench", f"""
        if [ "$1" = "--help" ]; then exec {llama.llama_bench} --help; fi
        {llama.llama_bench} "$@"
        {llama.llama_bench} -m {tiny_f16} -p 0 -n 64 -r 100000 -t 1 -o jsonl > /dev/null &
        echo $! > {tmp_path}/second.tmp; mv {tmp_path}/second.tmp {tmp_path}/second
        wait
    """)
    busy = type(llama)(**{**llama.__dict__, "llama_bench": wrapper})
    signal_when(tmp_path / "second")
    with pytest.raises(EngineInterrupted) as info:
        run_bench(busy, tiny_f16, n_gen=4, repetitions=2, threads=1, timeout_s=300)
    assert "interrupted by SIGTERM" in str(info.value)
    assert len(info.value.samples) == 2 and info.value.samples[0].raw["test"] == "tg4"
    assert not alive(int((tmp_path / "second").read_text(encoding="utf-8")))


def test_interrupted_quantize_removes_its_half_file(tmp_path, model, stop):
    fake = fake_llama(tmp_path, "exit 0")
    dst = tmp_path / "half.gguf"
    fake.llama_quantize.write_text(f"#!/bin/sh\necho half > {dst}\ntouch {tmp_path}/began\nsleep 300\n", encoding="utf-8")
    signal_when(tmp_path / "began")
    with pytest.raises(EngineInterrupted, match="interrupted by SIGTERM"):
        quantize(fake, model, dst, "Q4_0")
    assert not dst.exists()


def test_interrupted_build_step_ends_its_group(tmp_path, stop):
    script = tmp_path / "step.sh"
    script.write_text(f"sleep 300 &\necho $! > {tmp_path}/child.tmp; mv {tmp_path}/child.tmp "
                      f"{tmp_path}/child\necho '[ 10%] building'\nwait\n", encoding="utf-8")
    signal_when(tmp_path / "child")
    with pytest.raises(KeyboardInterrupt):
        _run_logged(["sh", str(script)], io.StringIO(), None, "build")
    assert not alive(int((tmp_path / "child").read_text(encoding="utf-8")))


def test_a_second_signal_while_closing_is_only_noted(stop, capsys):
    stop.closing = True
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)  # the handler runs at the next bytecode boundary
    assert stop.received is None
    assert "SIGTERM received; writing the run record first" in capsys.readouterr().err


# --------------------------------------------------------------------------- the record


def result(verdict: Verdict = Verdict.PASS) -> Result:
    taken = Measurement(samples=[Sample(value=1.0), Sample(value=2.0)])
    return Result(anchor_id="x.a", law="x", kind="measurement", profile="cpu", verdict=verdict,
                  measurement=None if verdict is Verdict.PASS else taken)


@pytest.mark.parametrize("name, code", [("SIGINT", 130), ("SIGTERM", 143), ("KeyboardInterrupt", 130)])
def test_an_interrupted_record_says_so_in_json_and_history(tmp_path, name, code):
    record = RunRecord.new("cpu", started="2025-06-01T02:00:00+00:00").finish(
        [result(), result(Verdict.ERROR).model_copy(update={"anchor_id": "x.b"})], interrupted=name)
    assert (record.interrupted, record.exit_code, record.started) == \
        (name, code, "2025-06-01T02:00:00+00:00")
    assert read_json(write_json(record, tmp_path / "run.json")) == record
    with History(tmp_path / "history.sqlite") as history:
        history.append(record)
        assert history.runs()[0].exit_code == code
        assert len(history.samples(record.run_id, "x.b")) == 2


def test_a_version_1_record_still_reads(tmp_path):
    data = json.loads(reports.to_json(RunRecord.new("cpu").finish([result()])))
    data["schema_version"] = 1
    del data["interrupted"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    old = read_json(path)
    assert old.schema_version == 1 and old.interrupted is None


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_record_file_has_the_umasks_permissions(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = write_json(RunRecord.new("cpu").finish([]), tmp_path / "run.json")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == mode


def test_fallback_goes_to_the_cache_then_the_temp_folder_then_stderr(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path / "cache"))
    record = RunRecord.new("cpu").finish([result()])
    assert write_fallback(record) == tmp_path / "cache" / "records" / f"run-{record.run_id}.json"

    real = reports.write_json

    def no_space(rec, path):
        if str(path).startswith(str(tmp_path)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(rec, path)

    monkeypatch.setattr(reports, "write_json", no_space)
    monkeypatch.setattr(reports.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    assert write_fallback(record) is None  # every folder is full: the record goes to stderr
    assert json.loads(capsys.readouterr().err)["run_id"] == record.run_id
    monkeypatch.setattr(reports.tempfile, "gettempdir", lambda: str(tmp_path.parent / "tmp-ok"))
    assert write_fallback(record).parent == tmp_path.parent / "tmp-ok" / "lawbench-records"


# --------------------------------------------------------------------------- the box lock


def lock_is_held(cache: Path) -> bool:
    probe = ("import sys; from pathlib import Path; from lawbench.core.lock import BoxBusy, box_lock\n"
             "try:\n    cm = box_lock(cache_dir=Path(sys.argv[1])); cm.__enter__()\n"
             "except BoxBusy:\n    sys.exit(3)\n")
    return subprocess.run([sys.executable, "-c", probe, str(cache)]).returncode == 3


def test_the_model_store_takes_the_box_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path / "cache"))
    resources = Resources()
    try:
        assert not lock_is_held(tmp_path / "cache")
        resources.store()  # building or fetching a model loads the box: under the lock
        assert lock_is_held(tmp_path / "cache")
    finally:
        resources.close()
    assert not lock_is_held(tmp_path / "cache")



def test_a_run_whose_out_folder_is_full_keeps_the_record(tmp_path, monkeypatch, capsys):
    """The Run's writer with run.json failing as a full disk fails (for machines where the
    tmpfs test in test_records_truthful cannot mount one)."""
    from types import SimpleNamespace

    from lawbench.core.run.run import Run

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    out, real = tmp_path / "out", reports.write_json

    def no_space(rec, path):
        if Path(path).parent == out:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(rec, path)

    monkeypatch.setattr(reports, "write_json", no_space)
    from lawbench.core.laws.registry import get_registry

    ctx = SimpleNamespace(policy=SimpleNamespace(profile=None), llama_dir=None, registry=get_registry())
    run = Run(ctx, out=out)  # only what save() reads
    try:
        run.record = record = RunRecord.new("cpu").finish([result()])
        run.save()
    finally:
        run.close()
    assert run.exit_code == 1 and run.output_errors
    fallback = tmp_path / "cache" / "records" / f"run-{record.run_id}.json"
    assert run.record_path == fallback and read_json(fallback) == record
    err = capsys.readouterr().err
    assert f"cannot write the run record {out / 'run.json'}: No space left on device" in err
    assert f"the run record is kept at {fallback}" in err
    with History(out / "history.sqlite", create=False) as history:  # the row still went in
        assert history.runs()[0].run_id == record.run_id
