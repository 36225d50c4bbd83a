"""Census counts from llama.cpp's model-load log (``llama-bench -v`` stderr, see bench.py).

The lines counted, as llama.cpp b11434 prints them:

  load_tensors: offloaded 13/13 layers to GPU          (GPU builds only; absent on CPU builds)
  load_tensors:   CPU_REPACK model buffer size =    27.00 MiB
  llama_kv_cache:        CPU KV buffer size =    20.00 MiB
  sched_reserve:        CPU compute buffer size =    64.51 MiB
  llama_perf_context_print:    graphs reused =          3
  sched_reserve: graph: nodes = 71, splits = 1, input objects = 4, input tensors = 9
  done_getting_tensors: tensor 'token_embd.weight' (f16) (and 20 others) cannot be used with
      preferred buffer type CPU_REPACK, using CPU instead           (one line in the log)
  repack_buffer_type ...: repack tensor blk.0.attn_q.weight with q4_0_8x8   (debug level, -v only)

Sizes are printed in MiB with two decimals, so the byte counts here are exact to ±5 KiB only.
A llama-bench run loads the model once per distinct model configuration and makes one context per
test; model buffers and offload come from the last load (a census runs one configuration), graph
reuse is summed over every context of the run.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

MIB = 1024 * 1024

_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_BUFFER = re.compile(r"^(?P<fn>\w+):\s+(?P<buf>\S+)\s+(?P<kind>model|KV|compute|output|RS|LoRA)"
                     r" buffer size\s*=\s*(?P<mib>[\d.]+) MiB")
_REUSED = re.compile(r"graphs reused\s*=\s*(\d+)")
_REPACK = re.compile(r"repack tensor (\S+) with (\S+)")
_LOAD_START = re.compile(r"llama_model_loader: loaded meta data")
_GRAPH = re.compile(r"graph: nodes = (\d+), splits = (\d+)")
_FALLBACK = re.compile(r"tensor '[^']+' \(\w+\)(?: \(and (\d+) others\))? cannot be used with "
                       r"preferred buffer type (\S+), using (\S+) instead")

_KIND_PREFIX = {"model": "buffer", "KV": "kv_buffer", "compute": "compute_buffer",
                "output": "output_buffer", "RS": "rs_buffer", "LoRA": "lora_buffer"}


def census_amount(label: str, value: float, short: bool = False) -> str:
    """A census count as people read it: buffer labels hold bytes (with MiB, or in MiB when
    ``short``), the others are counts."""
    if label.partition(":")[0] not in _KIND_PREFIX.values() or not value:
        return str(value)
    if value < MIB / 10:  # "at least 1 B": a buffer that exists
        return f"{value} B"
    return f"{value / MIB:.1f} MiB" if short else f"{value} B ({value / MIB:.2f} MiB)"


@dataclass
class LoadLog:
    """What one verbose llama-bench run said about where the model went."""

    model_loads: int = 0
    offloaded_layers: int | None = None
    total_layers: int | None = None
    model_buffers: dict[str, int] = field(default_factory=dict)  # buffer name -> bytes (last load)
    other_buffers: dict[str, int] = field(default_factory=dict)  # "kv_buffer:CPU" -> bytes (last)
    graphs_reused: list[int] = field(default_factory=list)  # one per context
    repacked: Counter = field(default_factory=Counter)  # repack kind ("q4_0_8x8") -> tensors
    # tensors refused by their preferred buffer type ("CPU_REPACK") in the last load
    fallbacks: Counter = field(default_factory=Counter)
    graph_nodes: int | None = None  # of the last context's reserved graph
    graph_splits: int | None = None

    def census(self) -> dict[str, int]:
        """Flat counts for a Census: offloaded_layers, total_layers, buffer:<name>, graphs_reused…"""
        counts: dict[str, int] = {"model_loads": self.model_loads,
                                  "contexts": len(self.graphs_reused),
                                  "graphs_reused": sum(self.graphs_reused)}
        if self.offloaded_layers is not None:
            counts["offloaded_layers"] = self.offloaded_layers
            counts["total_layers"] = self.total_layers or 0
        counts.update({f"buffer:{k}": v for k, v in self.model_buffers.items()})
        counts.update(self.other_buffers)
        if self.graph_splits is not None:
            counts["graph_nodes"], counts["graph_splits"] = self.graph_nodes or 0, self.graph_splits
        counts.update({f"buffer_fallback:{k}": v for k, v in self.fallbacks.items()})
        if self.repacked:
            counts["repacked_tensors"] = sum(self.repacked.values())
            counts.update({f"repack:{k}": v for k, v in self.repacked.items()})
        return counts


def parse_load_log(text: str) -> LoadLog:
    """Parse llama.cpp's load log. Lines it does not know are ignored; nothing is guessed."""
    log = LoadLog()
    for raw in text.splitlines():
        line = raw.strip()
        if _LOAD_START.search(line):
            # a new model load starts: its buffers replace the previous load's
            log.model_loads += 1
            log.model_buffers, log.repacked, log.fallbacks = {}, Counter(), Counter()
            continue
        m = _OFFLOADED.search(line)
        if m:
            log.offloaded_layers, log.total_layers = int(m.group(1)), int(m.group(2))
            continue
        m = _BUFFER.match(line)
        if m:
            size = round(float(m.group("mib")) * MIB)
            if m.group("kind") == "model":
                log.model_buffers[m.group("buf")] = log.model_buffers.get(m.group("buf"), 0) + size
            else:
                log.other_buffers[f"{_KIND_PREFIX[m.group('kind')]}:{m.group('buf')}"] = size
            continue
        m = _REUSED.search(line)
        if m:
            log.graphs_reused.append(int(m.group(1)))
            continue
        m = _GRAPH.search(line)
        if m:
            log.graph_nodes, log.graph_splits = int(m.group(1)), int(m.group(2))
            continue
        m = _FALLBACK.search(line)
        if m:
            log.fallbacks[m.group(2)] += 1 + int(m.group(1) or 0)
            continue
        m = _REPACK.search(line)
        if m:
            log.repacked[m.group(2)] += 1
    return log


def census_counts(text: str) -> dict[str, int]:
    """Shorthand: the flat census counts of a load log."""
    return parse_load_log(text).census()
