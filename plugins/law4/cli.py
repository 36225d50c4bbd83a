"""`lawbench predict MODEL.gguf --profile P`: price a model's decode speed from its header alone.

Prints one row per placement — bytes per token on each tier, where the bytes land (each tier's
capacity less its reserves, what is placed on it with KV at --ctx, what the page cache holds and
what streams from disk), the predicted tok/s or "does not fit" — plus the file's format and the η
each tier prices it with, kv-bytes/pos and, for MoE, the expert-count ceilings (decode: routed
share of bytes; prefill: of parameters, embedding excluded). The file's own tensor-type mix is
what is priced; MODEL may also be `manifest:<id>` (anchors/manifests) to price a published
architecture, at a stated quant mix with --weight-mix (e.g. Q4_K_M: llama.cpp's own rules).
--law-version prices one of the law's versions (docs/law4.md); default: the current one.
A MODEL that is missing, not a regular file, not a readable GGUF, or without what Law 4 needs
(such as <arch>.block_count, absent from CLIP / mmproj files) is exit 2 with one line naming it;
so is a profile that can price no placement (a tier without a bandwidth or an η): a request
the profile cannot answer, which the user fixes by naming another profile or measuring this one.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Optional

from lawbench import (
    ANCHOR_FILE,
    DataError,
    HardwareProfile,
    LawbenchError,
    NotApplicable,
    UsageError,
    whole_number,
)
from lawbench.plugins.law4 import pricing as P
from lawbench.plugins.law4.case import Law4Case
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.models import load_model
from lawbench.plugins.law4.profile import law4_profile
from lawbench.plugins.law4.quantmix import apply_mix, check_mix, weight_format
from lawbench.plugins.law4.shape import ModelShape
from lawbench.plugins.law4.shape_checks import ShapeError
from lawbench.plugins.law4.versions import BY_ID as VERSION_IDS
from lawbench.plugins.law4.versions import resolve

HELP = "price a GGUF's decode speed from its header (Law 4)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="a .gguf file (header only is enough) or manifest:<id>")
    p.add_argument("--profile", default="detect", help="hardware profile id, or 'detect' (default)")
    p.add_argument("--ctx", type=whole_number(0), default=0, help="context depth N: prices the KV term (default 0)")
    split = p.add_mutually_exclusive_group()
    split.add_argument("--ngl", type=whole_number(0), default=None, help="llama.cpp -ngl: layers on the GPU tier")
    split.add_argument("--cpu-layers", type=whole_number(0), default=None, help="blocks left on the CPU")
    p.add_argument("--experts-on-cpu", action="store_true", help="routed experts on the CPU (--cpu-moe)")
    p.add_argument("--kv-type", choices=("f16", "q8_0"), default="f16", help="KV cache type (default f16)")
    p.add_argument("--weight-mix", default=None, metavar="FTYPE",
                   help="re-type the model at a llama.cpp quant mix (Q4_K_M, Q4_0, Q2_K, …) before pricing")
    p.add_argument("--ubatch", type=whole_number(1), default=None, help="llama.cpp -ub: sizes the GPU compute buffer")
    p.add_argument("--law-version", default=None, choices=tuple(VERSION_IDS),
                   help="price one of Law 4's versions (default: the current one, 'general')")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _profile(name: str) -> HardwareProfile:
    from lawbench.host import get_registry, plugin_profiles

    profiles = plugin_profiles(get_registry())  # plugins' profiles too
    if name == "detect":
        from lawbench.hardware import fingerprint_machine, match_profile

        name, _ = match_profile(fingerprint_machine(), profiles)
    if name not in profiles:
        raise UsageError(f"unknown profile {name!r}; known: {', '.join(profiles)}")
    return profiles[name]


def placements(args: argparse.Namespace, shape: ModelShape, profile: HardwareProfile) -> list[tuple[str, dict]]:
    """The user's placement if one was asked for, else the usual three: all-GPU, experts-on-CPU
    (MoE), pure CPU — each as the `placement` table of a Law 4 case."""
    has_gpu = any(t.kind in ("vram", "unified") for t in profile.tiers)
    if args.ngl is not None or args.cpu_layers is not None or args.experts_on_cpu:
        pl: dict[str, Any] = {"experts_on_cpu": args.experts_on_cpu}
        label = []
        if args.ngl is not None:
            pl["ngl"] = args.ngl
            label.append(f"-ngl {args.ngl}")
        if args.cpu_layers is not None:
            pl["cpu_layers"] = args.cpu_layers
            label.append(f"{args.cpu_layers} CPU layers")
        if args.experts_on_cpu:
            label.append("experts on CPU")
        return [(", ".join(label), pl)]
    out: list[tuple[str, dict]] = []
    if has_gpu:
        out.append(("all on GPU", {}))
        if shape.is_moe:
            out.append(("experts on CPU", {"experts_on_cpu": True}))
    if any(t.kind == "ram" for t in profile.tiers) or not has_gpu:
        out.append(("pure CPU (-ngl 0)", {"ngl": 0}))
    return out


def price_rows(args: argparse.Namespace, shape: ModelShape, profile: HardwareProfile,
               faults: Optional[list[Exception]] = None) -> list[dict]:
    """One row per placement; a placement that cannot be priced is a row with its error (and the
    exception appended to `faults`, where given)."""
    law = Law4()
    version = resolve(getattr(args, "law_version", None))
    rows = []
    for label, pl in placements(args, shape, profile):
        case = Law4Case(quantity="decode_tok_s", model=f"path:{shape.source}", ctx=args.ctx,
                        kv_type=args.kv_type, placement=pl, ubatch=getattr(args, "ubatch", None))
        row: dict[str, Any] = {"placement": label}
        try:
            pr = law.price(case, shape, profile, version)
            row.update(pr.as_dict())
        except (LawbenchError, P.TierMissing) as exc:
            # a DataError worded for an anchor's case: drop the anchor-file placeholder
            placeholder = isinstance(exc, DataError) and exc.file == ANCHOR_FILE
            row["error"] = exc.message if placeholder else str(exc)
            if faults is not None:
                faults.append(exc)
        rows.append(row)
    return rows


def summary(shape: ModelShape) -> dict[str, Any]:
    out: dict[str, Any] = {"model": shape.source, "architecture": shape.architecture,
                           "format": weight_format(shape),
                           "file_bytes": sum(t.n_bytes for t in shape.tensors) + (shape.header_bytes or 0),
                           "active_bytes_per_token": P.active_bytes(shape),
                           "bytes_by_role": P.bytes_by_role(shape)}
    try:
        out["kv_bytes_per_pos"] = {t: P.kv_bytes_per_pos(shape, t) for t in ("f16", "q8_0")}
    except Exception as exc:  # a header without KV geometry still prices its weights
        out["kv_bytes_per_pos"] = {"error": str(exc)}
    if shape.is_moe and shape.expert_used_count:
        k_used = shape.expert_used_count
        s_bytes = P.routed_share(shape)
        ks = sorted({1, 2, max(k_used // 2, 1)} - {k_used})
        out["expert_ceilings"] = {"routed_share_bytes": s_bytes,
                                  "decode": {k: P.expert_ceiling(s_bytes, k, k_used) for k in ks}}
        if all(t.n_elements is not None for t in shape.tensors):
            routed = P.active_params(shape, count_embedding=False) - \
                P.active_params(shape, 0, count_embedding=False)
            s_par = routed / P.active_params(shape, count_embedding=False)
            out["expert_ceilings"]["routed_share_params"] = s_par
            out["expert_ceilings"]["prefill"] = {k: P.expert_ceiling(s_par, k, k_used) for k in ks}
    return out


def _gb(b: float) -> str:
    return f"{b / 1e9:.3g} GB"


def landing(r: dict) -> str:
    """Per tier: what is placed there (weights + KV) against what it can hold after reserves."""
    parts = []
    for t, held in r["resident_bytes"].items():
        usable = r["usable_bytes"].get(t)
        ok = r["fits"].get(t)
        mark = "" if ok is None else (" ok" if ok else " [red]over[/]")
        cap = f" / {_gb(usable)}" if usable is not None else ""
        res = f" (−{_gb(r['reserve_bytes'][t])} reserved)" if r["reserve_bytes"].get(t) else ""
        line = f"{t} {_gb(held)}{cap}{res}{mark}"
        if t in r["page_cache_bytes"]:
            line += (f"; page cache {_gb(r['page_cache_bytes'][t])}, "
                     f"{_gb(r['streamed_bytes'][t])}/token from disk")
        parts.append(line)
    return "\n".join(parts)


def eta_line(rows: list[dict]) -> str:
    """The η each tier prices weights with, its format and byte basis, from the first priced row."""
    for r in rows:
        if r.get("eta"):
            return "η: " + "  ".join(f"{t} {e['eta']:g} ({e['format'] or 'tier average'}, "
                                     f"{e['bytes']} bytes)" for t, e in r["eta"].items() if e["eta"])
    return ""


def render(profile: HardwareProfile, info: dict, rows: list[dict], ctx: int, version: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{info['model']}[/] ({info['architecture']}) on profile [bold]{profile.id}[/], ctx {ctx}, "
                  f"Law 4 {version}")
    console.print(f"format: {info['format'] or 'not named (tier-averaged η)'}  file bytes: "
                  f"{_gb(info['file_bytes'])}  " + eta_line(rows))
    console.print(f"active bytes/token: {_gb(info['active_bytes_per_token'])}  "
                  + "  ".join(f"{r} {_gb(b)}" for r, b in info["bytes_by_role"].items() if b))
    kv = info["kv_bytes_per_pos"]
    console.print("kv-bytes/pos: " + ("  ".join(f"{t} {v:,.0f} B" for t, v in kv.items())
                                      if "error" not in kv else kv["error"]))
    table = Table("placement", "bytes/token per tier", "where the bytes land (placed / usable)",
                  "tok/s", "binding term")
    for r in rows:
        if "error" in r:
            table.add_row(r["placement"], f"[yellow]{r['error']}[/]", "", "", "")
            continue
        per_tier = {t: r["weight_bytes"].get(t, 0) + r["kv_bytes"].get(t, 0) for t in r["weight_bytes"]}
        per_tier.update({t: b + r["weight_bytes"].get(t, 0) for t, b in r["kv_bytes"].items()})
        term = max(r["seconds"], key=r["seconds"].get) if r["seconds"] else "-"
        speed = "[red]does not fit[/]" if r["does_not_fit"] else f"{r['tok_s']:.3g}"
        table.add_row(r["placement"], ", ".join(f"{t} {_gb(b)}" for t, b in per_tier.items() if b),
                      landing(r), speed, term)
    console.print(table)
    for r in rows:
        for why in r.get("does_not_fit", []):
            console.print(f"[red]does not fit[/] {r['placement']}: {why}")
    ceil = info.get("expert_ceilings")
    if ceil:
        line = "  ".join(f"k={k}: x{v:.3f}" for k, v in ceil["decode"].items())
        console.print(f"expert ceiling, decode (routed {ceil['routed_share_bytes']:.1%} of bytes): {line}")
        if "prefill" in ceil:
            line = "  ".join(f"k={k}: x{v:.3f}" for k, v in ceil["prefill"].items())
            console.print(f"expert ceiling, prefill (routed {ceil['routed_share_params']:.1%} of params): {line}")
    for r in rows:
        for w in r.get("warnings", []):
            console.print(f"[yellow]warning[/] {r['placement']}: {w}")


def _shape(model: str) -> ModelShape:
    """The model the command line names; what cannot be priced is a DataError naming it.

    A file that exists wins over a `kind:` reading ("qwen:7b.gguf" in the cwd is that file).
    """
    from lawbench.store import ModelRef, catalog_ids

    path = os.path.expandvars(os.path.expanduser(model))
    if os.path.lexists(path):
        ref = f"path:{path}"  # anything but a regular GGUF file is refused by the header scanner
    elif ":" in model.split("/")[0]:
        ref = model
        try:
            ModelRef.parse(model)
        except ValueError:
            raise UsageError(f"{model}: no such file, and {model.partition(':')[0]!r} is not a model kind; "
                             f"give the path of a .gguf file, manifest:<id> or gguf:<catalogue id>") from None
    else:
        raise DataError(path, "no such file; give the path of a .gguf file, or manifest:<id>")
    try:
        shape = load_model(ref)
    except NotApplicable as exc:  # e.g. a gguf:<id> not in the model cache
        raise UsageError(str(exc)) from None
    except DataError as exc:
        if exc.file != ANCHOR_FILE:  # a malformed manifest or GGUF: named by its own path
            raise
        # An error law4 words for an anchor's case (e.g. "no manifest 'nope'"): here it is about
        # the command line, and the anchor-file placeholder means nothing to the user.
        raise UsageError(f"{model}: {exc.message}") from None
    except LawbenchError as exc:  # the model store's "unknown model id": a typo on the command line
        parsed = ModelRef.parse(ref)
        if parsed.kind == "gguf" and parsed.name not in catalog_ids():
            raise UsageError(f"{model}: {exc}") from None
        raise
    if not shape.has_tensors:
        raise UsageError(f"{shape.source} describes no tensors; predict needs a GGUF or a full manifest")
    if "block_count" not in shape.metadata:
        raise DataError(shape.source, f"no {shape.architecture}.block_count in the metadata: Law 4 prices "
                                      "per-layer placement and needs the layer count (a CLIP / mmproj "
                                      "projector? give the language model's GGUF)")
    return shape


def _unpriceable(profile: HardwareProfile, rows: list[dict], faults: list[Exception]) -> str:
    """One line for a profile that priced no placement: which of its tiers lacks what."""
    errors = list(dict.fromkeys(r["error"] for r in rows))
    if not all(isinstance(f, P.TierMissing) for f in faults):
        return f"profile {profile.id!r} cannot price this: {'; '.join(errors)}"
    no_bw = [t.name for t in profile.tiers if t.kind != "disk"
             and t.bandwidth_spec_gbs is None and t.bandwidth_measured_gbs is None]
    table = law4_profile(profile)
    no_eta = [t.name for t in profile.tiers if t.kind != "disk" and t.name not in no_bw
              and t.name not in table.eta and not table.eta_format.get(t.name)]
    # Both are needed for an absolute price: `profiles measure` gives a bandwidth, never an η (Law
    # 4's published η values are fractions of the reference box's spec bandwidth; cpu.toml's notes).
    advice = ("pick a profile that states both a bandwidth and an η for it (`lawbench profiles` lists "
              "them), or write your own: `lawbench profiles measure` measures this machine's RAM "
              "bandwidth, and the η ([laws.law4] eta.<tier>) is yours to state with its source")
    if no_bw:
        return (f"profile {profile.id!r} cannot price this: its tier {', '.join(map(repr, no_bw))} "
                f"states no bandwidth (spec or measured) for Law 4 to price bytes with; {advice}")
    if no_eta:
        return (f"profile {profile.id!r} cannot price this: its tier {', '.join(map(repr, no_eta))} "
                f"has no η ([laws.law4] eta.<tier>), the share of its bandwidth decode reaches; {advice}")
    return f"profile {profile.id!r} cannot price this: {'; '.join(errors)}"


def predict_command(args: argparse.Namespace) -> int:
    profile = _profile(args.profile)
    shape = _shape(args.model)
    if getattr(args, "weight_mix", None):
        try:
            check_mix(args.weight_mix)
            shape = apply_mix(shape, args.weight_mix)
        except (ValueError, ShapeError) as exc:
            raise UsageError(f"--weight-mix: {exc}") from None
    try:
        info = summary(shape)
        faults: list[Exception] = []
        rows = price_rows(args, shape, profile, faults)
    except ShapeError as exc:  # the header lacks something every placement needs
        message = str(exc).removeprefix(f"{shape.source}: ")
        raise DataError(shape.source, message) from None
    if all("error" in r for r in rows):
        # A valid request this profile cannot answer (no bandwidth or η for the tiers it needs):
        # exit 2, as for any usage error, with one line saying what the profile lacks.
        raise UsageError(_unpriceable(profile, rows, faults))
    if args.json:
        json.dump({"profile": profile.id, "law_version": resolve(getattr(args, "law_version", None)).id,
                   **info, "placements": rows}, sys.stdout, indent=2, default=str)
        print()
    else:
        render(profile, info, rows, args.ctx, resolve(getattr(args, "law_version", None)).id)
    return 0
