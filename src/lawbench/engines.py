"""The engines a law measures with: llama.cpp's tools, driven the way lawbench drives them, and
the process-group runner every engine process is started through.

A law gets its llama.cpp build from the run (``resources.llama()``) and hands it to these::

    from lawbench import engines

    run = engines.run_bench(resources.llama(), model, n_gen=64, repetitions=3)

Every tool runs in a process group of its own that ends with lawbench however it ends
(``popen_group``/``run_process``): a law that starts an engine of its own uses them too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from lawbench._surface import lazy

_EXPORTS = {
    # llama-bench (decode / prefill speed) and its verbose load log
    "run_bench": "lawbench.core.engines.bench",
    "bench_record_label": "lawbench.core.engines.bench:record_label",
    "capture_load_log": "lawbench.core.engines.bench",
    "quantize": "lawbench.core.engines.bench",
    # llama-batched-bench (parallel slots, expert-count overrides)
    "run_batched": "lawbench.core.engines.batched",
    "batched_record_label": "lawbench.core.engines.batched:record_label",
    # the --override-kv value that sets a MoE's top-k (any tool with llama.cpp's common arguments)
    "expert_override": "lawbench.core.engines.batched",
    # llama-perplexity over lawbench's shipped texts, one disjoint slice a visit
    "run_perplexity": "lawbench.core.engines.perplexity",
    "shipped_text": "lawbench.core.engines.perplexity",
    "DEFAULT_TEXT": "lawbench.core.engines.perplexity",
    "text_sha256": "lawbench.core.engines.perplexity",
    "text_slices": "lawbench.core.engines.perplexity",
    "SliceVisits": "lawbench.core.engines.perplexity",
    # llama-perplexity's KL-divergence mode: a reference's saved logits, then another file against them
    "save_base_logits": "lawbench.core.engines.perplexity",
    "run_kld": "lawbench.core.engines.perplexity",
    "parse_kld": "lawbench.core.engines.perplexity",
    # the text a case scores: a shipped one, or a pinned file of the public record fetched into the cache
    "RecordText": "lawbench.core.engines.texts",
    "TextReference": "lawbench.core.engines.texts",
    "resolve_text": "lawbench.core.engines.texts",
    "check_text_ref": "lawbench.core.engines.texts",
    "text_label": "lawbench.core.engines.texts",
    # llama-imatrix: a model's real input activations, cached by content and settings
    "Imatrix": "lawbench.core.engines.imatrix",
    "cached_imatrix": "lawbench.core.engines.imatrix",
    # llama-server with speculative decoding
    "serve": "lawbench.core.engines.server",
    "Request": "lawbench.core.engines.server",
    "Speculation": "lawbench.core.engines.server",
    # what ran: llama.cpp's load log, and the CUDA kernels a traced run executed
    "parse_load_log": "lawbench.core.engines.loadlog",
    "build_tracer": "lawbench.core.engines.kernels",
    "traced_env": "lawbench.core.engines.kernels",
    "read_trace": "lawbench.core.engines.kernels",
    "kernel_labels": "lawbench.core.engines.kernels",
    "kernel_time": "lawbench.core.engines.kernels",
    # Nsight Compute's warp-state counters of an engine's kernels (ncu around the engine command)
    "read_counters": "lawbench.core.engines.counters",
    "parse_ncu_csv": "lawbench.core.engines.counters",
    "long_scoreboard_share": "lawbench.core.engines.counters",
    "kernel_regex": "lawbench.core.engines.counters",
    "find_ncu": "lawbench.core.engines.counters",
    # the expert union of verify batches: lawbench's reader of the router's ffn_moe_topk tensors
    "read_union": "lawbench.core.engines.expert_union",
    "UnionRun": "lawbench.core.engines.expert_union",
    "NotMixture": "lawbench.core.engines.expert_union",
    # the source patches lawbench ships, by name (a case's bench.patches); unknown names are an error
    "source_patches": "lawbench.core.engines.patches:named",
    # one process group per engine process: run it, say what went wrong, raise it
    "run_process": "lawbench.core.engines.tool_run",
    "process_fault": "lawbench.core.engines.tool_run",
    "engine_error": "lawbench.core.engines.tool_run",
    "log_tail": "lawbench.core.engines.tool_run",
    "popen_group": "lawbench.core.procgroup",
    "group_ended": "lawbench.core.procgroup",
    "end_group": "lawbench.core.procgroup",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy(__name__, _EXPORTS)

if TYPE_CHECKING:  # for editors and type checkers: the same names, eagerly
    from lawbench.core.engines.batched import record_label as batched_record_label  # noqa: F401
    from lawbench.core.engines.batched import expert_override, run_batched  # noqa: F401
    from lawbench.core.engines.bench import capture_load_log, quantize, run_bench  # noqa: F401
    from lawbench.core.engines.bench import record_label as bench_record_label  # noqa: F401
    from lawbench.core.engines.expert_union import NotMixture, UnionRun, read_union  # noqa: F401
    from lawbench.core.engines.counters import find_ncu, kernel_regex, long_scoreboard_share, parse_ncu_csv, read_counters  # noqa: F401
    from lawbench.core.engines.imatrix import Imatrix, cached_imatrix  # noqa: F401
    from lawbench.core.engines.kernels import build_tracer, kernel_labels, kernel_time, read_trace, traced_env  # noqa: F401
    from lawbench.core.engines.loadlog import parse_load_log  # noqa: F401
    from lawbench.core.engines.patches import named as source_patches  # noqa: F401
    from lawbench.core.engines.perplexity import DEFAULT_TEXT, SliceVisits, run_perplexity  # noqa: F401
    from lawbench.core.engines.perplexity import shipped_text, text_sha256, text_slices  # noqa: F401
    from lawbench.core.engines.perplexity import parse_kld, run_kld, save_base_logits  # noqa: F401
    from lawbench.core.engines.server import Request, Speculation, serve  # noqa: F401
    from lawbench.core.engines.texts import RecordText, TextReference, check_text_ref  # noqa: F401
    from lawbench.core.engines.texts import resolve_text, text_label  # noqa: F401
    from lawbench.core.engines.tool_run import engine_error, log_tail, process_fault, run_process  # noqa: F401
    from lawbench.core.procgroup import end_group, group_ended, popen_group  # noqa: F401
