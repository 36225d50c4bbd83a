"""Depth recipes as real GGUF files: some layers requantized to a low-bit type, the rest untouched.

A recipe names layers (blk.N.*) and one low-bit type. Its file is made by the real llama-quantize
from the source model with one ``--tensor-type`` override per quantizable tensor (written to a
``--tensor-type-file``): a tensor of a chosen layer gets the low type; every other tensor is
overridden to *its own* type, which llama-quantize copies byte for byte (it requantizes only
when the type changes). So a recipe file differs from its source in exactly the chosen layers, and
the source file itself is the reference arm. The quantize log is read back to prove it: the
tensors it says it converted must be exactly the chosen layers' tensors.

The sources are already quantized (SmolLM2 Q4_1, Gemma-3 Q4_K_M), so ``--allow-requantize`` is
needed: a chosen tensor is dequantized from its 4-5-bit type and quantized again to the low type.
The damage measured is therefore the low type's error *on top of* the source's own quantization,
against the shipped file — not against fp16 weights, which these packages do not ship. At 2 bits
the low type's step is several times the source's, so the added error dominates; the register's
own probes were likewise Q4- or Q8_0-sourced (U-50: "Q4-sourced 4-band probe"; L-27: "both arms
are requantized from Q8_0").
"""
from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Iterable
from pathlib import Path

from lawbench.engines import engine_error, log_tail, process_fault, run_process

_LAYER = re.compile(r"^blk\.(\d+)\.")
_CONVERTED = re.compile(r"\]\s+(\S+)\s+- \[.*converting to (\w+)")


def layer_of(name: str) -> int | None:
    m = _LAYER.match(name)
    return int(m.group(1)) if m else None


def quantizable(shape: tuple[int, ...], name: str) -> bool:
    """What llama-quantize would touch: 2-D (or 3-D) weights that are not norms."""
    return sum(1 for d in shape if d > 1) >= 2 and name.endswith(".weight") and "_norm." not in name


def override_lines(header, layers: Iterable[int], low_type: str) -> list[str]:
    """``--tensor-type`` entries for a recipe: anchored patterns, one per quantizable tensor."""
    chosen = set(layers)
    out = []
    for t in header.tensors:
        if not quantizable(tuple(t.shape), t.name):
            continue
        typ = low_type if layer_of(t.name) in chosen else t.type_name
        out.append(f"^{re.escape(t.name)}$={typ.lower()}")
    return out


def chosen_tensors(header, layers: Iterable[int]) -> set[str]:
    chosen = set(layers)
    return {t.name for t in header.tensors
            if quantizable(tuple(t.shape), t.name) and layer_of(t.name) in chosen}


def quantize_command(quantize_tool: Path, src: Path, dst: Path, type_file: Path,
                     threads: int | None = None) -> list[str]:
    # The base type only has to be a quantized one (overrides apply only then); every tensor is
    # named by an override, so it never decides a tensor's type.
    cmd = [str(quantize_tool), "--allow-requantize", "--tensor-type-file", str(type_file),
           str(src), str(dst), "Q8_0"]
    return cmd + ([str(threads)] if threads else [])


def recipe_key(src: Path, layers: Iterable[int], low_type: str) -> str:
    st = src.stat()
    basis = f"{src.name}|{st.st_size}|{st.st_mtime_ns}|{sorted(set(layers))}|{low_type.lower()}"
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def build_recipe(llama, src: Path, layers: Iterable[int], low_type: str, workdir: Path, *,
                 timeout_s: float = 600, threads: int | None = None) -> Path:
    """The recipe's GGUF (made once per source, layers and type; kept in ``workdir``).

    :raises EngineError: llama-quantize failed, or converted other tensors than the chosen ones.
    """
    from lawbench import read_gguf_header as read_header

    layers = sorted(set(layers))
    if not layers:
        return src
    header = read_header(src)
    workdir.mkdir(parents=True, exist_ok=True)
    key = recipe_key(src, layers, low_type)
    dst = workdir / f"{src.stem}.{low_type.lower()}-{key}.gguf"
    if dst.is_file():
        return dst
    type_file = workdir / f"{dst.stem}.tensor-types.txt"
    type_file.write_text("\n".join(override_lines(header, layers, low_type)) + "\n", encoding="utf-8")
    part = dst.with_suffix(".part")
    cmd = quantize_command(llama.llama_quantize, src, part, type_file, threads)
    p = run_process(cmd, timeout_s)
    fault = process_fault(p, "llama-quantize", f"model {src.name} -> layers {layers} at {low_type}", cmd, timeout_s)
    log = p.stdout + "\n" + p.stderr
    if fault is None:
        converted = {m.group(1) for m in _CONVERTED.finditer(log)}
        wanted = chosen_tensors(header, layers)
        if converted != wanted:
            extra, missing = sorted(converted - wanted)[:3], sorted(wanted - converted)[:3]
            fault = (f"llama-quantize on model {src.name} converted other tensors than layers {layers}: "
                     f"unexpected {extra}, not converted {missing}; command: {shlex.join(cmd)}")
        else:
            types = {m.group(2).lower() for m in _CONVERTED.finditer(log)}
            if types != {low_type.lower()}:
                fault = (f"llama-quantize on model {src.name} converted layers {layers} to {sorted(types)}, "
                         f"not {low_type} (a shape fallback?); command: {shlex.join(cmd)}")
    if fault:
        part.unlink(missing_ok=True)
        raise engine_error(p, fault, log=log_tail(log))
    part.rename(dst)
    return dst
