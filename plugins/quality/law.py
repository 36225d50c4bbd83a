"""Quality cost: what a quantization, a KV cache type or a recipe does to a model's predictions,
measured by the real llama-perplexity on a named text with the register's context and chunks.

Every arm scores the same text with the same ctx and chunks, once (perplexity is deterministic
for a file, a text and a build: a second visit would print the same numbers). llama-perplexity's
chunks are disjoint and each is scored from an empty KV cache, so chunk i of every arm is one
paired sample — the same design as a Law 3 slice, with the record's own chunking (ctx 2048,
32 chunks) instead of lawbench's. The verdict's interval is then:

  * ppl_ratio: core's Student-t on the per-chunk log-ratios nll_a - nll_b (geometric mean =
    the whole-text ratio PPL(a)/PPL(b), since every chunk scores the same number of tokens);
  * ppl, ppl_delta, ppl_delta_ratio: the statistic of the whole text (PPL = exp of the mean nll over
    the chunks drawn), with a jackknife over chunks: the pseudo-values n·θ − (n−1)·θ₋ᵢ, centred on
    θ, go to core's Student-t on values (the jackknife's standard error for a smooth function of means);
  * kld_mean: the per-chunk mean KL divergence against the reference's saved logits (Student-t
    on values).

A case with population = "chunks" claims the figure of exactly its chunks (a gate's printed score):
every chunk is scored and the figure is computed, not estimated, so its interval has no width and
the source's own ± (the band) judges it.

The text is a shipped one or a pinned file of the public record (lawbench.core.engines.texts);
a record text absent here is a SKIP that names it, and a FAIL on the anchor's own runner.
"""
from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from lawbench import (
    ANCHOR_FILE,
    Anchor,
    DataError,
    EngineError,
    HardwareProfile,
    Law,
    LawbenchError,
    NotApplicable,
    Resources,
    Sample,
    Sampler,
)
from lawbench.engines import quantize, resolve_text, run_kld, run_perplexity, save_base_logits, text_label
from lawbench.plugins.quality.case import Arm, QualityCase, parse_case
from lawbench.store import cache_root, model_file, sha256_of


def _workdir() -> Path:
    return cache_root() / "quality"


def ppl(nll: list[float]) -> float:
    return math.exp(sum(nll) / len(nll))


def whole_text(case: QualityCase, nll: dict[str, list[float]]) -> float:
    """The case's statistic over the chunks given (each arm's list of per-chunk nll)."""
    p = {arm: ppl(v) for arm, v in nll.items()}
    if case.statistic == "ppl":
        return p["a"]
    if case.statistic == "ppl_delta":
        return p["a"] - p["b"]
    num = sum(p[k] - p["ref"] for k in case.num)
    den = sum(p[k] - p["ref"] for k in case.den)
    return num / den if den else math.inf  # a non-finite statistic is an ERROR, never dropped


def jackknife(case: QualityCase, nll: dict[str, list[float]]) -> list[float]:
    """Pseudo-values n·θ − (n−1)·θ₋ᵢ, one per chunk, shifted so that their mean is the whole-text
    statistic θ: their Student-t interval is θ ± t·(the jackknife standard error), Tukey's interval
    around the plug-in figure."""
    n = len(next(iter(nll.values())))
    full = whole_text(case, nll)
    out = []
    for i in range(n):
        loo = whole_text(case, {arm: v[:i] + v[i + 1:] for arm, v in nll.items()})
        out.append(n * full - (n - 1) * loo)
    # centred on the whole-text figure, the number the record prints (the jackknife's spread, not
    # its bias correction: with 4 chunks the correction moved a delta ratio by 9 %)
    shift = full - sum(out) / n
    return [v + shift for v in out]


def requantized(llama: Any, src: Path, type_name: str, timeout_s: float, threads: int | None,
                tensor_types: Sequence[str] = ()) -> Path:
    """``src`` requantized to ``type_name`` (llama-quantize --allow-requantize), with the arm's
    per-tensor rules (--tensor-type "<regex>=<type>") over it, made once per source file and recipe."""
    st = src.stat()
    recipe = "|".join(tensor_types)
    basis = f"{src.name}|{st.st_size}|{st.st_mtime_ns}|{type_name.upper()}" + (f"|{recipe}" if recipe else "")
    key = hashlib.sha256(basis.encode()).hexdigest()[:16]
    dst = _workdir() / "quantized" / f"{src.stem}.{type_name.lower()}-{key}.gguf"
    if not dst.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        part = dst.with_name(dst.name + ".part.gguf")
        rules = [a for t in tensor_types for a in ("--tensor-type", t)]
        quantize(llama, src, part, type_name.upper(), timeout_s=timeout_s, threads=threads,
                 extra_args=["--allow-requantize", *rules])
        part.replace(dst)
    return dst


def _header(path: Path) -> Any:
    from lawbench import read_gguf_header  # gguf and numpy: not at `lawbench --help`

    return read_gguf_header(path)


def rule_matches(anchor: Anchor, arm: str, rules: Sequence[str], src: Path) -> dict[str, list[str]]:
    """The source's tensors each --tensor-type rule selects (llama-quantize searches the tensor name
    with the rule's regex). A rule that selects nothing would leave the arm equal to its base — a
    band probe measuring no band — so it is a DataError naming the rule, never a quiet zero."""
    names = [t.name for t in _header(src).tensors]
    out: dict[str, list[str]] = {}
    for i, rule in enumerate(rules):
        pattern = rule.rpartition("=")[0]
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise DataError(ANCHOR_FILE, f"{pattern!r} is not a regular expression ({exc})", anchor=anchor.id,
                            field=f"arms.{arm}.tensor_types.{i}") from None
        out[rule] = [n for n in names if rx.search(n)]
        if not out[rule]:
            raise DataError(ANCHOR_FILE, f"{pattern!r} selects no tensor of {src.name} ({len(names)} tensors, e.g. "
                            f"{names[len(names) // 2] if names else 'none'}): the arm would be its base file",
                            anchor=anchor.id, field=f"arms.{arm}.tensor_types.{i}")
    return out


def types_of(path: Path, names: Sequence[str]) -> dict[str, int]:
    """How many of these tensors the file holds in each type: the evidence that a rule took hold."""
    wanted = set(names)
    return dict(Counter(t.type_name for t in _header(path).tensors if t.name in wanted))


def moe_architecture(anchor: Anchor, arm: str, k: int, path: Path) -> str:
    """The file's architecture, for --override-kv <arch>.expert_used_count: a file that is not a
    mixture of experts, or has fewer experts than k, is refused before any run (llama.cpp would
    ignore an override of a key the model never reads)."""
    h = _header(path)
    n_expert = h.arch("expert_count", None)
    if not n_expert:
        raise DataError(ANCHOR_FILE, f"experts_used = {k}, but {path.name} ({h.architecture}) is not a mixture of "
                        f"experts: its header has no {h.architecture}.expert_count", anchor=anchor.id,
                        field=f"arms.{arm}.experts_used")
    if k > int(n_expert):
        raise DataError(ANCHOR_FILE, f"experts_used = {k}, but {path.name} has {n_expert} experts",
                        anchor=anchor.id, field=f"arms.{arm}.experts_used")
    return h.architecture


class ChunkSampler:
    """Scores every arm once over the whole case, then hands out one chunk per sample, in order."""

    def __init__(self, anchor: Anchor, case: QualityCase, arms: dict[str, Arm], files: dict[str, Path],
                 text: Path, llama: Any, threads: int | None, info: dict[str, Any],
                 architectures: dict[str, str] | None = None):
        self.anchor, self.case, self.arms, self.files, self.text = anchor, case, arms, files, text
        self.architectures = architectures or {}  # arm -> general.architecture, for an experts_used override
        self.llama, self.threads, self.info = llama, threads, info
        self.log_scale = case.statistic == "ppl_ratio"
        self.per_chunk: dict[str, list[float]] | None = None
        self.runs: dict[str, dict[str, Any]] = {}
        self.next = 0
        self._env: dict[str, Any] = {}

    def _args(self, arm: str) -> list[str]:
        return [*self.case.engine_args, *self.arms[arm].engine_args(self.architectures.get(arm))]

    def _score(self) -> dict[str, list[float]]:
        c = self.case
        common = dict(ctx=c.ctx, chunks=c.chunks, threads=self.threads, timeout_s=c.timeout_s)
        if c.statistic == "kld_mean":
            logits = self._base_logits(common)
            run = run_kld(self.llama, self.files["a"], logits, extra_args=self._args("a"), **common)
            self.runs["a"] = run.record()
            return {"a": run.chunk_kld}
        out = {}
        for arm in sorted(self.files):
            run = run_perplexity(self.llama, self.files[arm], self.text, extra_args=self._args(arm), **common)
            self.runs[arm] = {"ppl": run.ppl, "final_ppl": run.final_ppl, "cmd": run.cmd, **run.record()}
            out[arm] = run.chunk_nll
        return out

    def _base_logits(self, common: dict[str, Any]) -> Path:
        ref = self.files["ref"]
        basis = "|".join([str(ref), str(ref.stat().st_size), str(ref.stat().st_mtime_ns), self.info["text_sha256"],
                          str(self.case.ctx), str(self.case.chunks), *self._args("ref"),
                          str(getattr(self.llama, "version", ""))])
        logits = _workdir() / "logits" / f"{hashlib.sha256(basis.encode()).hexdigest()[:16]}.kld"
        if not logits.is_file():
            run = save_base_logits(self.llama, ref, self.text, logits, extra_args=self._args("ref"), **common)
            self.runs["ref"] = {"ppl": run.ppl, "final_ppl": run.final_ppl, **run.record()}
        self.info["base_logits"] = logits.name
        return logits

    def draw(self, n: int) -> list[Sample]:
        if self.per_chunk is None:
            self.per_chunk = self._score()
        chunks = len(next(iter(self.per_chunk.values())))
        if self.next + n > chunks:
            raise EngineError(f"anchor {self.anchor.id}: {chunks} chunks give {chunks} samples; the budget asked "
                              f"for sample {self.next + n}")
        out = []
        for i in range(self.next, self.next + n):
            row = {arm: v[i] for arm, v in self.per_chunk.items()}
            if self.case.statistic == "ppl_ratio":
                value = math.exp(row["a"] - row["b"])
            elif self.case.statistic == "kld_mean":
                value = row["a"]
            elif self.case.statistic == "ppl":  # for people: the chunk's own perplexity (jackknife decides)
                value = math.exp(row["a"])
            else:  # for people: the chunk's log-perplexity gap; the verdict's values are the jackknife's
                first = self.case.num[0] if self.case.statistic == "ppl_delta_ratio" else "a"
                value = row[first] - row["ref" if "ref" in row else "b"]
            out.append(Sample(value=value, arm="a/b" if self.case.statistic == "ppl_ratio" else "a",
                              raw={"chunk": i, "per_chunk": {k: round(v, 6) for k, v in row.items()}}))
        self.next += n
        return out

    def statistic(self, samples: list[Sample]) -> list[float]:
        if self.case.statistic in ("ppl_ratio", "kld_mean"):
            values = [s.value for s in samples]
        else:
            assert self.per_chunk is not None
            idx = [s.raw["chunk"] for s in samples]
            values = jackknife(self.case, {arm: [v[i] for i in idx] for arm, v in self.per_chunk.items()})
        if self.case.population == "chunks":
            return [self._figure(values)] * len(values)
        return values

    def _figure(self, values: list[float]) -> float:
        """The figure of all the chunks (population "chunks": parse_case made the budget take every
        one): the centre core's interval would have, with no scatter left to estimate."""
        if self.log_scale:
            return math.exp(sum(math.log(v) for v in values) / len(values))
        return sum(values) / len(values)  # the jackknife's values are centred on the whole-text figure

    def environment(self) -> dict[str, Any]:
        if not self._env:
            try:
                from lawbench.hardware import environment_snapshot  # psutil: not at `lawbench --help`

                self._env = environment_snapshot()
            except Exception as exc:  # noqa: BLE001 - evidence, never a reason to lose a run
                self._env = {"error": f"{type(exc).__name__}: {exc}"}
        return self._env

    def protocol(self) -> dict[str, Any]:
        unit = ("one llama-perplexity chunk (disjoint, scored from an empty KV cache), every arm scored on it "
                "in one process per arm")
        how = {"ppl_ratio": "student-t on per-chunk log-ratios", "kld_mean": "student-t on per-chunk mean KLD"}
        interval = how.get(self.case.statistic, "jackknife pseudo-values over chunks, student-t")
        if self.case.population == "chunks":
            interval = "none: every chunk scored, the figure of these chunks computed exactly (population = chunks)"
        return {"sampling_unit": unit, "statistic": self.case.statistic, "interval": interval,
                **self.info, "runs": self.runs}


class Quality(Law):
    name = "quality"
    title = "Quality cost: perplexity deltas, their ratios and KL divergence on a named text"
    anchors_package = "lawbench.anchors.quality"
    case_model = QualityCase

    def check_anchor(self, anchor: Anchor) -> None:
        parse_case(anchor)

    def sampler(self, anchor: Anchor, profile: HardwareProfile, resources: Resources) -> Sampler:
        case, arms = parse_case(anchor)
        sources = {name: model_file(arm.model, resources) for name, arm in arms.items()}
        try:
            text = resolve_text(case.text)
        except NotApplicable:
            raise
        except LawbenchError as exc:
            if isinstance(exc, EngineError):
                raise
            raise DataError(ANCHOR_FILE, str(exc), anchor=anchor.id, field="case.text") from None
        llama = resources.llama()
        threads = case.threads or profile.engine_threads()
        selected = {name: rule_matches(anchor, name, arm.tensor_types, sources[name])
                    for name, arm in arms.items() if arm.tensor_types}
        files = {name: requantized(llama, src, arms[name].quantize, case.timeout_s, threads, arms[name].tensor_types)
                 if arms[name].quantize else src for name, src in sources.items()}
        archs = {name: moe_architecture(anchor, name, arm.experts_used, files[name])
                 for name, arm in arms.items() if arm.experts_used}
        info = {"text": text_label(case.text), "text_sha256": sha256_of(text), "ctx": case.ctx,
                "chunks": case.chunks, "threads": threads,
                "arms": {n: {"file": f.name, "bytes": f.stat().st_size, "args": arms[n].engine_args(archs.get(n)),
                             "quantize": arms[n].quantize, "label": arms[n].label,
                             **({"tensor_types": {rule: types_of(f, names) for rule, names in selected[n].items()}}
                                if n in selected else {})}
                         for n, f in files.items()}}
        return ChunkSampler(anchor, case, arms, files, text, llama, threads, info, archs)

    def predict(self, anchor: Anchor, profile: HardwareProfile, resources: Resources | None = None):
        raise NotApplicable(f"law 'quality' makes no prediction for anchor {anchor.id!r}: a quality cost "
                            "is measured, its band is the source's published figure")


__all__ = ["ChunkSampler", "Quality", "jackknife", "whole_text"]
