"""The `bench` table of a measured Law 4 case: how llama-bench (or llama-batched-bench, or
llama-server) runs it — one test per visit, its repetitions, the page-cache state it starts from,
the engine switches a census's planted faults turn, and what a census counts. A model only, so
case.py holds it without importing the samplers that run it (measure.py, speculative.py, census.py).

    bench = { n_gen = 32, depth = 4096, reps = 2, timeout_s = 120 }
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from lawbench import FiniteFloat, LawbenchError, Strict
from lawbench.engines import source_patches
from lawbench.plugins.law4.pricing import KV_TYPES
from lawbench.plugins.law4.server_case import ServerOptions


class BenchCase(Strict):
    """How llama-bench measures a case: one test (tg n_gen at depth, or pp n_prompt) per visit.

    ``tool = "batched-bench"`` runs llama-batched-bench instead (lawbench.core.engines.batched):
    the same test at ``slots`` parallel sequences (-npl; the reading is their aggregate decode),
    and the only way a measured case runs at ``case.experts_used`` (--override-kv
    <arch>.expert_used_count, checked in the load log). At one slot its decode after ``depth``
    prompt tokens is llama-bench's tg n_gen @ d depth.
    """

    tool: Literal["llama-bench", "batched-bench", "server"] = "llama-bench"
    slots: int = Field(default=1, ge=1)  # -npl: parallel sequences (batched-bench only)
    n_gen: int = Field(default=32, ge=0)  # -n: tokens generated and timed (decode)
    n_prompt: int = Field(default=0, ge=0)  # -p: a prefill test instead (n_gen = 0)
    depth: int = Field(default=0, ge=0)  # -d: KV positions filled (untimed) before each repetition
    threads: Optional[int] = Field(default=None, gt=0)  # -t; default: the profile's threads
    n_gpu_layers: Optional[int] = Field(default=None, ge=0)  # -ngl; default: from case.placement
    flash_attn: Optional[Literal["on", "off", "auto"]] = None  # -fa; default: llama-bench's
    ubatch: Optional[int] = Field(default=None, gt=0)  # -ub
    batch: Optional[int] = Field(default=None, gt=0)  # -b (llama-bench's default 2048 caps -ub)
    # -lm: how the weights are loaded; "none" is the register's --no-mmap of older builds
    # (b11434's llama-bench has no -mmp; its -lm none reads the file into allocated memory).
    load_mode: Optional[Literal["auto", "none", "mmap", "mlock", "mmap+mlock", "dio"]] = None
    # -ctv when the V cache differs from case.kv_type (which sets -ctk): a K-only quantized
    # cache is kv_type = "q8_0" with cache_type_v = "f16". The law prices both at kv_type, so
    # such a case is measured (measurement, ratio), never priced (agreement).
    cache_type_v: Optional[Literal[KV_TYPES]] = None  # type: ignore[valid-type]
    reps: int = Field(default=3, ge=1)  # -r: repetitions per visit (one engine process)
    # One visit's value from its repetitions: their median, or the fastest one — a neighbour on
    # a shared box only ever slows a repetition, so the fastest is the engine's own speed
    # (the register's min-of-N rule, C-24, turned around). Use "fastest" only where the
    # band is on a ratio of arms that share it, never against a published mean.
    per_visit: Literal["median", "fastest"] = "median"
    warmup: bool = True  # llama-bench's own warm-up run inside each visit
    timeout_s: FiniteFloat = Field(default=120.0, gt=0)  # per visit (one llama-bench process)
    # "read": read the whole model file sequentially (`cat model.gguf > /dev/null`, register D-29)
    # right before every visit of this arm, so the page cache holds what a sequential read leaves
    # there; the read's bytes and seconds go into the visit's raw record. Only the page cache is
    # touched: on a file larger than free RAM the read also evicts the previous run's working set.
    # "evict": drop the file's cached pages instead (posix_fadvise DONTNEED, no root), so every
    # visit starts cold whatever ran before it (L-29's 'colder state', L-31's predecessor).
    # "keep": touch nothing, only record the residency (the state whatever ran before left).
    # Every way the raw record holds how much of the file was resident before and after the
    # prime and after the visit (mincore; lawbench.core.hardware.pagecache).
    prime: Optional[Literal["read", "evict", "keep"]] = None
    # tool = "server": llama-server with speculation (plugins/law4/speculative.py); n_gen is n_predict
    server: Optional[ServerOptions] = None
    # The engine's own switches that turn a fast path off (a census's planted faults use them):
    # --repack 0 (no CPU_REPACK), -nopo 1 (no op offload: a prompt on CPU weights stays on the
    # CPU), and environment variables llama.cpp reads (GGML_CUDA_DISABLE_GRAPHS=1).
    repack: Optional[bool] = None
    op_offload: Optional[bool] = None
    env: dict[str, str] = Field(default_factory=dict)
    # Source patches lawbench ships (lawbench.engines.source_patches), by name: this arm runs on the
    # run's llama.cpp source built with them, a build of its own (register V-14: the pre-Volta CUDA-graph
    # disable behind GGML_CUDA_FORCE_GRAPHS, which `env` then sets or not).
    patches: list[str] = Field(default_factory=list)
    # What a census counts (one verbose llama-bench run): its load log; also the CUDA kernels
    # that ran (lawbench.core.engines.kernels, CUDA builds only); or also the engine process's
    # peak per-PID GPU memory next to the buffers its load log reports (NVML).
    census: Literal["load-log", "kernels", "gpu-memory"] = "load-log"

    @field_validator("patches")
    @classmethod
    def _shipped(cls, names: list[str]) -> list[str]:
        try:
            source_patches(names, "bench.patches")
        except LawbenchError as exc:
            raise ValueError(str(exc).removeprefix("bench.patches: ")) from None
        return names

    @model_validator(mode="after")
    def _one_test(self) -> "BenchCase":
        # a kernel or memory census may run both tests in its one run: prompt kernels and decode kernels
        if (self.n_gen > 0) == (self.n_prompt > 0) and not (self.census != "load-log" and self.n_gen and self.n_prompt):
            raise ValueError("a bench table runs one test: give n_gen (decode) or n_prompt (prefill), not both")
        if self.prime is not None and self.tool == "server":
            raise ValueError("prime: the page-cache priming step runs before llama-bench or "
                             "llama-batched-bench visits, not llama-server sessions")
        if (self.tool == "server") != (self.server is not None):
            raise ValueError("bench.server (prompt, speculation) goes with tool = \"server\", and only there")
        if self.slots > 1 and self.tool != "batched-bench":
            raise ValueError("slots: parallel sequences run in llama-batched-bench; set tool = \"batched-bench\"")
        switches = [n for n in ("repack", "op_offload") if getattr(self, n) is not None] + (["env"] if self.env else []) \
            + (["patches"] if self.patches else [])
        if switches and self.tool != "llama-bench":
            raise ValueError(f"{switches[0]}: the engine switches are passed to llama-bench only")
        if self.census != "load-log" and self.tool != "llama-bench":
            raise ValueError(f"census = {self.census!r} counts one llama-bench run; set tool = \"llama-bench\"")
        if self.tool == "batched-bench" and self.n_prompt and self.depth:
            raise ValueError("depth: llama-batched-bench times a prompt from position 0; a prefill "
                             "test at depth runs in llama-bench")
        return self

    def priced_ctx(self) -> int:
        """KV length the law prices a decode visit at: token i of n_gen reads depth + i + 1
        positions, so the mean is depth + (n_gen + 1) / 2 (rounded)."""
        return self.depth + (self.n_gen + 1) // 2 if self.n_gen else self.depth
