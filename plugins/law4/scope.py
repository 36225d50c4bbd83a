"""Whether a model lies inside Law 4's scope on this CPU — decided by stated, measured rules before
its anchor runs (case.scope = "cpu-tier"; docs/law4.md "Scope on a CPU tier").

The law prices a token as bytes read from a memory tier over η·BW. Two things make a small model on
a CPU something else, and each is checked on every arm of the anchor:

1. **It fits in the last-level cache.** After the first token its weights are read from cache, not
   from the RAM tier the law prices. Rule: weight bytes per token ≤ the machine's last-level cache
   (read from sysfs) → out of scope.
2. **Per-op cost dominates.** The law has no per-operation term. A *skeleton* of the arm's graph —
   the same layer count and weight format, rows as narrow as the format allows (64, or 256 for
   K-quants and IQ formats), a 384-token vocabulary, so its bytes are at most a few MiB — decodes at
   (at least) the arm's fixed per-token cost. Rule: skeleton token time over the arm's own token
   time above 25 % → out of scope: a term that size can by itself move a ratio outside L-01's
   ±25 %. Both are measured in PROBE_ROUNDS interleaved rounds (skeleton, arm, skeleton, arm …),
   the anchor's own engine settings, and each takes its fastest repetition over all rounds: a busy
   neighbour only ever slows a repetition, and per-op cost is what it slows most.

Out of scope is a SKIP with the measured figures (``OutOfScope``), on any runner: not a missing
resource and not a finding about the law.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from lawbench import EngineError, HardwareProfile, LawbenchError, OutOfScope

if TYPE_CHECKING:
    from lawbench.plugins.law4.case import Law4Case

# L-01's published accuracy for the law: a fixed cost above this share of a token can alone move
# a priced ratio outside the band (the rule's threshold, not fitted to any run).
MAX_FIXED_SHARE = 0.25
SKELETON_MIN_WIDTH = 64  # rows as narrow as a format allows, but never below 64 (4 heads of 16)
SKELETON_VOCAB = 384
PROBE_ROUNDS = 3


def last_level_cache_bytes(sysfs: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> Optional[int]:
    """The largest cache level's size as sysfs reports it for CPU 0 ("32768K"); None where unknown."""
    best: tuple[int, int] = (0, 0)
    for index in sorted(sysfs.glob("index*")):
        try:
            level = int((index / "level").read_text(encoding="utf-8"))
            text = (index / "size").read_text(encoding="utf-8").strip()
            kind = (index / "type").read_text(encoding="utf-8").strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        try:
            size = int(text.rstrip("KMGkmg")) * scale
        except ValueError:
            continue
        best = max(best, (level, size))
    return best[1] or None


def weight_bytes(header: Any) -> int:
    """Bytes a decoded token reads of the weights: every tensor but the token embedding (a one-row
    lookup), which a tied model also reads whole as its output head."""
    names = {t.name for t in header.tensors}
    tied = "output.weight" not in names
    return sum(t.n_bytes for t in header.tensors if t.name != "token_embd.weight" or tied)


def weight_type_of(header: Any) -> str:
    """The file's llama-quantize type name ("Q4_K_M") from general.file_type."""
    import gguf

    from lawbench.store import WEIGHT_TYPES

    ftype = header.metadata.get("general.file_type")
    names = {int(getattr(gguf.LlamaFileType, v[1])): k for k, v in WEIGHT_TYPES.items()}
    if ftype is None or int(ftype) not in names:
        # the rule cannot be decided: an ERROR that says so, never a silent SKIP
        raise LawbenchError(f"{Path(header.path).name}: its file type {ftype} has no synthetic skeleton, so "
                            f"Law 4's per-op scope rule cannot be measured for it")
    return names[int(ftype)]


def skeleton_spec(header: Any) -> Any:
    """The synthetic skeleton of a model's graph: its layer count and format, negligible bytes."""
    from lawbench.store import SyntheticSpec, WEIGHT_TYPES

    n_layer = int(header.arch("block_count"))
    fmt = weight_type_of(header)
    width = max(SKELETON_MIN_WIDTH, WEIGHT_TYPES[fmt][0])  # K-quant and IQ rows are whole at 256
    return SyntheticSpec(id=f"skeleton-{n_layer}l-{fmt.lower()}", n_layer=n_layer, n_embd=width,
                         n_ff=width, n_head=4, n_head_kv=4, n_vocab=SKELETON_VOCAB, weight_type=fmt)


def check_scope(arms: dict[str, Path], visit_of: Callable[[str, Path], Callable[[int], Any]],
                build: Callable[[Any], Path], reps: int,
                llc: Optional[int] = None) -> dict[str, Any]:
    """Apply both rules to every arm; raise OutOfScope naming the first arm outside, else return
    what was measured (it goes into the result's detail).

    :param visit_of: (arm, model file) -> a visit function with that arm's engine settings.
    :param build: a synthetic spec -> its GGUF file (the run's model store).
    """
    from lawbench import read_gguf_header as read_header

    llc = last_level_cache_bytes() if llc is None else llc
    out: dict[str, Any] = {"rule": "cpu-tier", "llc_bytes": llc, "max_fixed_share": MAX_FIXED_SHARE}
    for arm, model in arms.items():
        header = read_header(model)
        wb = weight_bytes(header)
        row: dict[str, Any] = {"model": model.name, "weight_bytes": wb}
        out[arm] = row
        if llc and wb <= llc:
            raise OutOfScope(f"arm {arm} ({model.name}) is outside Law 4's scope on this CPU: its "
                             f"{wb / 2**20:.1f} MiB of weights per token fit in the {llc / 2**20:.0f} MiB "
                             f"last-level cache, so tokens after the first read cache, not RAM", detail=out)
    for arm, model in arms.items():
        row, spec = out[arm], skeleton_spec(read_header(model))
        skeleton = build(spec)
        readings: dict[str, list[float]] = {"skeleton": [], "model": []}
        for _ in range(PROBE_ROUNDS):
            readings["skeleton"] += visit_of(arm, skeleton)(reps).values
            readings["model"] += visit_of(arm, model)(reps).values
        t_skel, t_model = _token_seconds(readings["skeleton"]), _token_seconds(readings["model"])
        share = t_skel / t_model
        row.update(skeleton=skeleton.name, skeleton_ms_per_token=round(t_skel * 1e3, 3),
                   ms_per_token=round(t_model * 1e3, 3), fixed_share=round(share, 4), probe_rounds=PROBE_ROUNDS)
        if share > MAX_FIXED_SHARE:
            raise OutOfScope(f"arm {arm} ({model.name}) is outside Law 4's scope on this CPU: a skeleton of "
                             f"its graph ({spec.n_layer} layers, same format, "
                             f"negligible bytes) takes {t_skel * 1e3:.2f} ms per token, {share:.0%} of the "
                             f"model's {t_model * 1e3:.2f} ms (the rule allows {MAX_FIXED_SHARE:.0%}): per-op "
                             f"cost, which the law does not price, decides its speed", detail=out)
    return out


def check_measured_on(case: Law4Case, profile: HardwareProfile, cpu_model: Optional[str] = None) -> None:
    """A figure its source scopes to its own machine (case.measured_on) is judged only on such a
    machine: the profile must give the engine at least the source's threads (the anchor then runs at
    exactly that count) and, where the source names its CPU, this CPU's model must contain that name.
    Anywhere else: OutOfScope naming both machines — a SKIP, never a finding about the claim."""
    scope = case.measured_on
    if scope is None:
        return
    where: dict[str, Any] = {"rule": "measured-on", "source": scope.source}
    if scope.threads is not None:
        here = profile.engine_threads()
        where.update(threads_published=scope.threads, threads_here=here)
        if here is None or here < scope.threads:
            have = ("the engine's own default (this profile states no thread count)" if here is None
                    else f"{here} (profile {profile.id}: threads = {profile.threads!r})")
            raise OutOfScope(f"the figure is scoped to {scope.threads} engine threads ({scope.source}); "
                             f"this runner gives the engine {have}, so the claim is out of scope here",
                             detail=where)
    if scope.cpu_model_contains is not None:
        if cpu_model is None:
            from lawbench.hardware import fingerprint_machine  # psutil: not at `lawbench --help`

            cpu_model = fingerprint_machine().cpu_model
        where.update(cpu_published=scope.cpu_model_contains, cpu_here=cpu_model)
        if scope.cpu_model_contains.lower() not in (cpu_model or "").lower():
            raise OutOfScope(f"the figure is scoped to the source's CPU, {scope.cpu_model_contains} "
                             f"({scope.source}); this CPU is {cpu_model or 'unknown'!r}, so the claim is out "
                             f"of scope here", detail=where)


def _token_seconds(readings: list[float]) -> float:
    """Seconds per token of the fastest repetition (a neighbour only ever slows one down)."""
    values = [v for v in readings if v and v > 0]
    if not values:
        raise EngineError("the scope probe's visit gave no reading, so the per-op rule cannot be decided")
    return 1.0 / max(values)
