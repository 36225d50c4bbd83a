"""How fast is the GGUF header scanner on a 152k-vocabulary header, and how fast is GGUFReader?

    python benchmarks/header_scan.py            # synthetic Qwen2-sized header
    python benchmarks/header_scan.py --real     # also the store's cached real models

Goals (ARCHITECTURE.md): first read < 1 s, repeated read < 50 ms. The file is written with
gguf's GGUFWriter: a Qwen2-style tokenizer (152,064 tokens, scores, token types, ~151k merges)
and a few hundred tensors with small data, so GGUFReader can open it too.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import gguf
import numpy as np

import lawbench.core.store.gguf_header as gh

VOCAB = 152_064
MERGES = 151_387
LAYERS = 28
GOAL_FIRST_S = 1.0
GOAL_REPEAT_S = 0.050


def write_qwen_like(path: Path) -> None:
    w = gguf.GGUFWriter(path, arch="qwen2")
    w.add_block_count(LAYERS)
    w.add_context_length(32768)
    w.add_embedding_length(3584)
    w.add_feed_forward_length(18944)
    w.add_head_count(28)
    w.add_head_count_kv(4)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    # byte-level BPE tokens look like this: short, mostly ASCII, some multi-byte
    w.add_token_list([f"Ġtok{i}" if i % 7 else f"ĠĊ字{i}" for i in range(VOCAB)])
    w.add_token_scores([0.0] * VOCAB)
    w.add_token_types([1] * VOCAB)
    w.add_token_merges([f"Ġt o{i}" for i in range(MERGES)])
    small = np.zeros(64, np.float16)
    names = ["token_embd.weight", "output_norm.weight", "output.weight"]
    for i in range(LAYERS):
        names += [f"blk.{i}.{t}" for t in ("attn_norm.weight", "attn_q.weight", "attn_q.bias",
                                          "attn_k.weight", "attn_k.bias", "attn_v.weight", "attn_v.bias",
                                          "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight",
                                          "ffn_up.weight", "ffn_down.weight")]
    for name in names:
        w.add_tensor(name, small)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def timed(fn, repeat: int = 1) -> float:
    """Median wall time of `repeat` calls, in seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def verdict(value: float, goal: float) -> str:
    return f"{'meets' if value < goal else 'MISSES'} goal < {goal * 1000:.0f} ms"


def bench(path: Path, *, reader: bool) -> None:
    h = gh.read_header(path, use_cache=False)
    print(f"\n{path}  ({os.path.getsize(path) / 1e6:.1f} MB, header {h.data_offset / 1e6:.2f} MB, "
          f"{len(h.tensors)} tensors, {len(h.metadata)} keys)")
    gh.clear_memory_cache()
    for entry in gh.cache_dir().glob("*.json"):
        entry.unlink()
    first = timed(lambda: gh.read_header(path))  # scan + write the disk cache
    print(f"  first read (scan + cache write):   {first * 1000:8.1f} ms   {verdict(first, GOAL_FIRST_S)}")
    scan = timed(lambda: gh.read_header(path, use_cache=False), repeat=3)
    print(f"  scan only (use_cache=False):       {scan * 1000:8.1f} ms")
    repeat = timed(lambda: gh.read_header(path), repeat=20)
    print(f"  repeated, in-process cache:        {repeat * 1000:8.3f} ms   {verdict(repeat, GOAL_REPEAT_S)}")

    def from_disk():
        gh.clear_memory_cache()
        gh.read_header(path)
    disk = timed(from_disk, repeat=5)
    print(f"  repeated, disk cache (new process): {disk * 1000:7.1f} ms   {verdict(disk, GOAL_REPEAT_S)}")
    if reader:
        r = timed(lambda: gguf.GGUFReader(path))
        print(f"  gguf.GGUFReader:                   {r * 1000:8.1f} ms   ({r / scan:.0f}x the scan)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", action="store_true", help="also time the store's cached real models")
    ap.add_argument("--no-reader", action="store_true", help="skip GGUFReader (slow)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["LAWBENCH_CACHE"] = str(Path(tmp) / "cache")  # a cold, private header cache
        path = Path(tmp) / "qwen-like-152k.gguf"
        t0 = time.perf_counter()
        write_qwen_like(path)
        print(f"wrote {path.name} with GGUFWriter in {time.perf_counter() - t0:.1f} s")
        bench(path, reader=not args.no_reader)
        if args.real:
            from lawbench.core.store import ModelStore

            store = ModelStore(cache_dir=Path(os.path.expanduser("~/.cache/lawbench")))
            for model in store.catalog.model:  # real models only: synthetic ones need a build
                bench(store.path(model.id, fetch=False), reader=not args.no_reader)


if __name__ == "__main__":
    main()
