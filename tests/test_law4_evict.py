"""bench.prime = "evict": the model file's cached pages dropped before each engine visit, without
root, and the file's residency measured before and after (lawbench.core.hardware.pagecache).

Everything here is measured on this machine: real files, the kernel's own mincore counts, the real
cached llama-bench on a synthetic GGUF. Nothing is mocked.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from _engine_fixtures import *

from lawbench.core.errors import EngineError
from lawbench.core.hardware import pagecache
from lawbench.core.hardware.profiles import load_profiles
from lawbench.plugins.law4 import measure
from lawbench.plugins.law4.bench_case import BenchCase
from lawbench.plugins.law4.case import Law4Case

if pagecache.supported():
    pytest.skip(pagecache.supported(), allow_module_level=True)

CPU = load_profiles()["cpu"]


def _is_tmpfs(path: Path) -> bool:
    best = ("", "")
    for line in Path("/proc/mounts").read_text(encoding="utf-8").splitlines():
        _, mnt, fstype, *_ = line.split()
        if str(path).startswith(mnt) and len(mnt) > len(best[0]):
            best = (mnt, fstype)
    return best[1] == "tmpfs"


def test_eviction_empties_a_real_gguf_and_measuring_reads_nothing(tiny_f16):
    if _is_tmpfs(tiny_f16):
        pytest.skip(f"{tiny_f16} is on tmpfs: its pages are its storage and cannot be evicted")
    tiny_f16.read_bytes()  # through the page cache: every page resident
    full = pagecache.residency(tiny_f16)
    assert full.pages == -(-tiny_f16.stat().st_size // full.page_size)
    assert full.resident == full.pages
    done = measure.prime_evict(tiny_f16)
    assert done["resident_before"]["resident_pages"] == full.pages
    assert done["resident_after"]["resident_pages"] == 0  # the kernel's own count, after DONTNEED
    assert done["bytes"] == tiny_f16.stat().st_size
    # mincore faults nothing in: measuring the cold file again leaves it cold
    assert pagecache.residency(tiny_f16).resident == 0
    assert pagecache.residency(tiny_f16).resident == 0


def test_an_eviction_the_kernel_ignores_is_an_engine_error(tmp_path):
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK) and _is_tmpfs(shm)):
        pytest.skip("no writable tmpfs at /dev/shm")
    f = shm / f"lawbench-evict-{os.getpid()}.bin"
    try:
        f.write_bytes(os.urandom(1 << 20))
        assert pagecache.residency(f).fraction == 1.0
        with pytest.raises(EngineError, match="dropped none"):
            measure.prime_evict(f)
    finally:
        f.unlink(missing_ok=True)


def test_read_prime_records_the_residency_it_leaves(tiny_f16):
    if _is_tmpfs(tiny_f16):
        pytest.skip(f"{tiny_f16} is on tmpfs")
    pagecache.evict(tiny_f16)
    done = measure._prime("read", tiny_f16)
    assert done["mode"] == "read" and done["resident_before"]["resident_pages"] == 0
    assert done["resident_after"]["fraction"] == 1.0  # a file far smaller than RAM: all of it
    assert done["residency_method"] == pagecache.METHOD


@pytest.mark.integration
def test_every_real_llama_bench_visit_starts_from_an_evicted_file(llama, tiny_f16):
    """Two real visits of an evicted arm: before each, the file is dropped (residency measured 0);
    the engine then reads it back in (measured after the visit), and the next eviction drops
    exactly what that visit left."""
    if _is_tmpfs(tiny_f16):
        pytest.skip(f"{tiny_f16} is on tmpfs")
    case = Law4Case.model_validate({"quantity": "decode_tok_s", "model": f"path:{tiny_f16}",
                                    "bench": {"n_gen": 4, "reps": 1, "threads": 2, "prime": "evict"}})
    visit = measure._visit(llama, tiny_f16, measure.bench_params(case, CPU), case.bench)
    first, second = visit(1), visit(1)
    for v in (first, second):
        prime = v.raw["prime"]
        assert v.values and all(x > 0 for x in v.values)  # the engine ran and read tok/s
        assert prime["mode"] == "evict" and prime["resident_after"]["resident_pages"] == 0
        assert prime["resident_after_visit"]["resident_pages"] > 0  # the engine faulted pages in
    # what the first visit left is what the second eviction found and dropped
    assert second.raw["prime"]["resident_before"] == first.raw["prime"]["resident_after_visit"]


def test_evict_is_another_configuration_with_the_same_engine_flags():
    raw = {"quantity": "decode_tok_s", "model": "gguf:syn-25m-q4_0", "bench": {"n_gen": 8}}
    plain = Law4Case.model_validate(raw)
    evict = plain.model_copy(update={"bench": BenchCase(n_gen=8, prime="evict")})
    read = plain.model_copy(update={"bench": BenchCase(n_gen=8, prime="read")})
    params = measure.bench_params(plain, CPU)
    assert measure.bench_params(evict, CPU) == params
    labels = {measure._label(c, params) for c in (plain, evict, read)}
    assert len(labels) == 3 and any("prime=evict" in lab for lab in labels)
    with pytest.raises(ValueError, match="prime"):
        BenchCase(n_gen=8, tool="server", prime="evict", server={"prompt": "novel"})


def test_the_cold_end_anchor_evicts_before_the_published_command():
    """L-29's '11.0 later' runs the C-32 range's own command, every visit from an evicted file."""
    from importlib import resources as ir

    from lawbench.core.claims.loading import load_anchors

    files = [ir.files("lawbench.anchors.law4") / f for f in ("gtx1060.toml", "history.toml")]
    loaded = load_anchors(files, laws=["law4"], profiles=load_profiles()).by_id()
    cold = measure.arm_cases(loaded["law4.gtx1060.meas.35b-ngl12.l29-cold-evicted"].anchor)["main"]
    warm = measure.arm_cases(loaded["law4.c32.range.qwen3.6-35b-a3b-ngl12"].anchor)["main"]
    assert cold.bench.prime == "evict" and warm.bench.prime is None
    assert cold.model_copy(update={"bench": cold.bench.model_copy(update={"prime": None})}) == warm
