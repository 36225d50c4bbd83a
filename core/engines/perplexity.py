"""Perplexity as a sampled measurement: the real ``llama-perplexity``, one process per visit.

Public surface (other laws code against this; signatures are stable):

    shipped_text(name: str = DEFAULT_TEXT) -> Path
        A text lawbench ships (anchors/texts/, source and license in anchors/texts/README.md).
    text_slices(text: str | Path, n_slices: int, chars_per_slice: int) -> list[str]
        Disjoint slices of a text, cut at line ends, in order: slice k never overlaps slice j.
    run_perplexity(llama: LlamaCpp, model: Path | str, text: Path | str, *, ctx: int = 128,
                   chunks: Optional[int] = None, threads: Optional[int] = None,
                   timeout_s: float = 600, extra_args: Sequence[str] = ()) -> PerplexityRun
        One llama-perplexity process on one text file. PerplexityRun.chunk_nll: the mean negative
        log-likelihood (nats/token) of every chunk, in order; .nll the mean over chunks (equal token
        counts, so this is the run's log-perplexity); .ppl = exp(.nll); .final_ppl the tool's own
        "Final estimate"; .tokens_per_chunk, .cmd, .wall_s, .log. Faults are EngineError.
    SliceVisits(llama, model, slices: list[str], *, ctx, chunks, threads, timeout_s, workdir, extra_args=())
        A callable arm for lawbench.core.stats.protocol.ArmSampler: visit k runs slice k (then k+1 …)
        and returns Visit(values=[exp(slice nll)]). Two arms built on the same slices visit the
        same slice in the same round, so a ratio sample a/b is exp(nll_a - nll_b) on one slice.

The sampling unit (docs/verdicts.md): perplexity is deterministic for a given model and text, so
its scatter is the text's, not the machine's. A sample is one **disjoint slice** of the shipped
text, scored in one engine visit; two models are compared on the *same* slice in one round, and
the sample is their perplexity ratio on it, exp(nll_a − nll_b). core's Student-t interval on the
logs of those ratios is then a t-interval on the paired per-slice differences of log-perplexity —
the textbook paired design, honest as long as slices are disjoint (no token is scored twice) and
taken in a fixed order (the same code on the same box gives the same slices, the same numbers and
the same verdict). Chunks inside one visit are not samples of their own: they are reported
(``chunk_nll``) for people, while the verdict's unit stays the visit.

llama-perplexity prints no JSON. It is run with ``--ppl-output-type 1``, which prints one line per
chunk: the chunk's start token, the running perplexity, the running mean NLL (six decimals) and its
standard error. Every chunk scores the same number of tokens (the second half of its context minus
one), so chunk i's own mean NLL is i·mean_i − (i−1)·mean_(i−1). ``parse_perplexity`` does that and
checks it against the tool's own running perplexity; tests/data/perplexity/ holds real output.
"""
from __future__ import annotations

import hashlib
import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lawbench.core.engines.tool_run import _reason, engine_error, log_tail, process_fault, run_logged
from lawbench.core.errors import EngineError, LawbenchError
from lawbench.core.stats.protocol import Visit

if TYPE_CHECKING:
    from lawbench.core.engines.llamacpp import LlamaCpp

DEFAULT_TEXT = "python-reference-3.11.txt"
# A chunk line of --ppl-output-type 1: "%8d  %.4lf  %4lf  %4lf" (start, ppl, mean nll, its s.e.).
_CHUNK = re.compile(r"^\s*(\d+)\s+(\d+\.\d+|inf|nan)\s+(-?\d+\.\d+|inf|nan)\s+(-?\d+\.\d+|inf|nan|-nan)\s*$")
_SETUP = re.compile(r"(?:calculating|computing) perplexity over (\d+) chunks, n_ctx=(\d+), batch_size=(\d+), n_seq=(\d+)")
_FINAL = re.compile(r"Final estimate: PPL = ([0-9.]+|inf|nan) \+/- ([0-9.]+|inf|nan)")
_TOO_SHORT = re.compile(r"you need at least (\d+) tokens.*|tokenizes to only (\d+) tokens")


@dataclass
class PerplexityRun:
    """One llama-perplexity process: what each chunk scored and what it took."""

    chunk_nll: list[float]  # mean negative log-likelihood (nats/token) of each chunk, in order
    tokens_per_chunk: int  # tokens scored per chunk: n_ctx - n_ctx/2 - 1
    n_ctx: int
    final_ppl: float | None  # the tool's "Final estimate"
    cmd: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    log: str = ""  # stderr tail
    lost_runs: int = 0  # clean runs before this one whose chunk lines the logger lost at exit

    @property
    def nll(self) -> float:
        """Mean NLL over the chunks (each scores the same number of tokens): log-perplexity."""
        return sum(self.chunk_nll) / len(self.chunk_nll)

    @property
    def ppl(self) -> float:
        return math.exp(self.nll)

    def record(self) -> dict[str, Any]:
        return {"chunk_nll": [round(v, 6) for v in self.chunk_nll], "nll": round(self.nll, 6),
                "ppl": round(self.ppl, 4), "final_ppl": self.final_ppl, "n_ctx": self.n_ctx,
                "tokens_per_chunk": self.tokens_per_chunk, "wall_s": round(self.wall_s, 3),
                **({"lost_runs": self.lost_runs} if self.lost_runs else {})}


def parse_perplexity(stdout: str, stderr: str = "") -> PerplexityRun:
    """Per-chunk NLL from ``llama-perplexity --ppl-output-type 1`` output.

    :raises EngineError: no chunk lines, a chunk line that is not finite, or per-chunk values that
        do not reproduce the tool's own running perplexity (a format this parser does not know).
    """
    text = stdout + "\n" + stderr
    setup = _SETUP.search(text)
    if not setup:
        raise EngineError("llama-perplexity printed no 'calculating perplexity over N chunks, n_ctx=…' "
                          "line: not the output of a perplexity run")
    n_ctx = int(setup.group(2))
    means, ppls = [], []
    for line in stdout.splitlines():
        m = _CHUNK.match(line)
        if m:
            ppls.append(float(m.group(2)))
            means.append(float(m.group(3)))
    if not means:
        raise EngineError(f"llama-perplexity printed no chunk lines (expected {setup.group(1)} with "
                          "--ppl-output-type 1)")
    if not all(math.isfinite(v) for v in means + ppls):
        raise EngineError(f"llama-perplexity printed a running perplexity that is not finite "
                          f"({ppls}): the model's logits are broken, not a sample")
    chunk = [means[0]] + [(i + 1) * means[i] - i * means[i - 1] for i in range(1, len(means))]
    for i, (mean, ppl) in enumerate(zip(means, ppls)):
        # %.4lf of exp(mean) against exp(%lf mean): agree to the printed rounding
        if abs(math.exp(mean) - ppl) > 1e-4 * ppl + 6e-5:
            raise EngineError(f"llama-perplexity chunk {i + 1}: running perplexity {ppl} is not "
                              f"exp(mean nll {mean}); unknown output format")
    final = _FINAL.search(stderr or text)
    return PerplexityRun(chunk_nll=chunk, tokens_per_chunk=n_ctx - n_ctx // 2 - 1, n_ctx=n_ctx,
                         final_ppl=float(final.group(1)) if final else None)


def perplexity_command(llama: LlamaCpp, model: Path, text: Path, *, ctx: int = 128,
                       chunks: int | None = None, threads: int | None = None,
                       extra_args: Sequence[str] = ()) -> list[str]:
    # -b ctx: one sequence per pass. The default batch (2048) packs 2048/ctx chunks into one KV
    # cache and every token attends over the whole batch's mask: ~10x slower on a small model.
    cmd = [str(llama.llama_perplexity), "-m", str(model), "-f", str(text), "-c", str(ctx),
           "-b", str(ctx), "--ppl-output-type", "1"]
    if chunks is not None:
        cmd += ["--chunks", str(chunks)]
    if threads is not None:
        cmd += ["-t", str(threads)]
    return cmd + [str(a) for a in extra_args]


def run_perplexity(llama: LlamaCpp, model: Path | str, text: Path | str, *,
                   ctx: int = 128, chunks: int | None = None, threads: int | None = None,
                   timeout_s: float = 600, extra_args: Sequence[str] = (),
                   env: dict[str, str] | None = None) -> PerplexityRun:
    """Run llama-perplexity once (its own process group, killed at ``timeout_s``).

    :param chunks: score exactly this many chunks; a text too short for them is an EngineError.
    :raises EngineError: missing model, text or tool, non-zero exit, signal, timeout, text too
        short, unparseable output — one line naming the model, the text and the command.
    """
    model, text = Path(model), Path(text)
    if not model.is_file():
        raise EngineError(f"model file {model} does not exist")
    if not text.is_file():
        raise EngineError(f"text file {text} does not exist (llama-perplexity on model {model.name})")
    cmd = perplexity_command(llama, model, text, ctx=ctx, chunks=chunks, threads=threads,
                             extra_args=extra_args)
    p = run_logged(cmd, timeout_s, env, complete=all_chunks_printed)
    where = f"model {model.name}, text {text.name}"
    fault = process_fault(p, "llama-perplexity", where, cmd, timeout_s)
    short = _TOO_SHORT.search(p.stderr)
    if fault is None and short:
        fault = f"llama-perplexity on {where}: {_reason(p.stderr)}; command: {shlex.join(cmd)}"
    if fault:
        raise engine_error(p, fault, log=log_tail(p.stderr))
    try:
        run = parse_perplexity(p.stdout, p.stderr)
    except EngineError as exc:
        raise EngineError(f"{exc} ({where}; command: {shlex.join(cmd)})", log=log_tail(p.stderr)) from None
    if chunks is not None and len(run.chunk_nll) != chunks:
        raise EngineError(f"llama-perplexity on {where} scored {len(run.chunk_nll)} chunks, not the "
                          f"{chunks} asked for: the text is too short for ctx {ctx}; command: "
                          f"{shlex.join(cmd)}", log=log_tail(p.stderr))
    run.cmd, run.wall_s, run.log, run.lost_runs = cmd, p.wall_s, log_tail(p.stderr), p.lost_runs
    return run


def all_chunks_printed(stdout: str, stderr: str) -> bool:
    """Every chunk the tool announced has its line: the chunk lines go through llama.cpp's common
    logger, whose last lines can be lost at exit (lawbench.core.engines.tool_run.run_logged). Output
    that announced no chunks (a text too short, not a perplexity run) is complete: its fault is
    named by the parser, never cured by running again."""
    setup = _SETUP.search(stdout + "\n" + stderr)
    printed = sum(1 for line in stdout.splitlines() if _CHUNK.match(line))
    return not setup or printed >= int(setup.group(1))


# --------------------------------------------------------------------------- the shipped texts


def shipped_text(name: str = DEFAULT_TEXT) -> Path:
    """The path of a text lawbench ships in lawbench.anchors.texts (README.md says whence)."""
    from importlib.resources import files

    path = Path(str(files("lawbench.anchors.texts") / name))
    if not path.is_file():
        raise LawbenchError(f"lawbench ships no text {name!r} (anchors/texts/); "
                            f"shipped: {', '.join(sorted(p.name for p in path.parent.glob('*.txt') if not p.name.endswith('.license.txt')))}")
    return path


def text_sha256(path: Path | str) -> str:
    """The sha256 of a text's bytes: what a record names the text it scored by."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def text_slices(text: str | Path, n_slices: int, chars_per_slice: int) -> list[str]:
    """``n_slices`` disjoint slices of about ``chars_per_slice`` characters, cut at line ends, in
    the text's order. Fewer come back when the text runs out (never an overlapping slice)."""
    body = Path(text).read_text(encoding="utf-8") if isinstance(text, Path) else text
    out, start = [], 0
    while len(out) < n_slices and start < len(body):
        end = body.find("\n", start + chars_per_slice)
        end = len(body) if end < 0 else end + 1
        if end - start < chars_per_slice:
            break  # the tail is too short to be a slice like the others
        out.append(body[start:end])
        start = end
    return out


class SliceVisits:
    """One arm for InterleavedSampler: each visit scores the next disjoint slice with one process.

    Arms made on the same ``slices`` stay on the same slice round by round (InterleavedSampler
    visits each arm once per round, and never for a warm-up, which would spend a slice).
    """

    def __init__(self, llama: LlamaCpp, model: Path | str, slices: Sequence[str], *,
                 workdir: Path | str, ctx: int = 128, chunks: int | None = None,
                 threads: int | None = None, timeout_s: float = 600, extra_args: Sequence[str] = ()):
        self.llama, self.model, self.slices = llama, Path(model), list(slices)
        self.workdir = Path(workdir)
        self.ctx, self.chunks, self.threads, self.timeout_s = ctx, chunks, threads, timeout_s
        self.extra_args = list(extra_args)  # e.g. -ctk/-ctv: the arm's engine options, every visit
        self.next = 0

    def slice_file(self, k: int) -> Path:
        path = self.workdir / f"slice-{k:03d}.txt"
        if not path.is_file():
            self.workdir.mkdir(parents=True, exist_ok=True)
            path.write_text(self.slices[k], encoding="utf-8")
        return path

    def __call__(self, reps: int = 1) -> Visit:
        k = self.next
        if k >= len(self.slices):
            raise EngineError(f"the shipped text gives only {len(self.slices)} disjoint slices; a "
                              f"budget asking for more would score a slice twice (model {self.model.name})")
        self.next += 1
        run = run_perplexity(self.llama, self.model, self.slice_file(k), ctx=self.ctx,
                             chunks=self.chunks, threads=self.threads, timeout_s=self.timeout_s,
                             extra_args=self.extra_args)
        return Visit(values=[run.ppl], raw={"slice": k, **run.record()}, wall_s=run.wall_s)


# --------------------------------------------------------------------------- KL-divergence mode
# llama-perplexity --kl-divergence-base FILE on the reference model scores the text as usual and
# saves its log-probabilities; --kl-divergence with the same FILE on another model reads the tokens
# and those log-probabilities back and prints, per chunk, running means of: PPL(Q), ln(PPL(Q)/PPL(base)),
# KLD, RMS Δp and same-top-p (tools/perplexity/perplexity.cpp, kl_divergence()), then a final report.
# Each chunk scores the same number of tokens, so chunk i's own mean is i·m_i − (i−1)·m_(i−1).

_KLD_SETUP = re.compile(r"kl_divergence: computing over (\d+) chunks, n_ctx=(\d+)")
_NUM = r"(-?\d+\.\d+|-?nan|-?inf)"
_KLD_CHUNK = re.compile(rf"^\s*(\d+)\s+{_NUM}\s+±\s+{_NUM}\s+{_NUM}\s+±\s+{_NUM}\s+{_NUM}\s+±\s+{_NUM}"
                        rf"\s+{_NUM}\s+±\s+{_NUM}\s+%\s+{_NUM}\s+±\s+{_NUM}\s+%\s*$")
_KLD_MEAN = re.compile(r"Mean\s+KLD:\s+(-?\d+\.\d+)\s+±\s+(\d+\.\d+)")
_KLD_MEDIAN = re.compile(r"Median\s+KLD:\s+(-?\d+\.\d+)")
_SAME_TOP = re.compile(r"Same top p:\s+(\d+\.\d+)\s+±\s+(\d+\.\d+)\s+%")


@dataclass
class KldRun:
    """One llama-perplexity --kl-divergence process against a saved base."""

    chunk_kld: list[float]  # mean KL divergence (nats/token) of each chunk, in order
    chunk_log_ratio: list[float]  # each chunk's nll(Q) - nll(base)
    chunk_same_top: list[float]  # each chunk's share of tokens whose argmax agrees with the base's
    mean_kld: float  # the tool's final "Mean KLD"
    median_kld: float | None
    same_top_p: float | None  # the final "Same top p", a fraction
    n_ctx: int
    cmd: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    log: str = ""

    @property
    def kld(self) -> float:
        return sum(self.chunk_kld) / len(self.chunk_kld)

    def record(self) -> dict[str, Any]:
        return {"chunk_kld": [round(v, 6) for v in self.chunk_kld],
                "chunk_log_ratio": [round(v, 6) for v in self.chunk_log_ratio],
                "chunk_same_top": [round(v, 6) for v in self.chunk_same_top],
                "mean_kld": self.mean_kld, "median_kld": self.median_kld, "same_top_p": self.same_top_p,
                "n_ctx": self.n_ctx, "wall_s": round(self.wall_s, 3)}


def _per_chunk(running: list[float]) -> list[float]:
    return [running[0]] + [(i + 1) * running[i] - i * running[i - 1] for i in range(1, len(running))]


def parse_kld(stdout: str, stderr: str = "") -> KldRun:
    """Per-chunk KLD from ``llama-perplexity --kl-divergence`` output.

    :raises EngineError: not a KL-divergence run, no chunk lines, a value that is not finite, or
        per-chunk values whose mean is not the tool's own final "Mean KLD" (an unknown format).
    """
    text = stdout + "\n" + stderr
    setup = _KLD_SETUP.search(text)
    if not setup:
        raise EngineError("llama-perplexity printed no 'kl_divergence: computing over N chunks' line: "
                          "not the output of a --kl-divergence run (a perplexity-only run prints no KLD)")
    rows = [m for m in (_KLD_CHUNK.match(line) for line in stdout.splitlines()) if m]
    if not rows:
        raise EngineError(f"llama-perplexity --kl-divergence printed no chunk lines (expected {setup.group(1)})")
    vals = [[float(m.group(k)) for k in (4, 6, 10)] for m in rows]  # log ratio, KLD, same top (%)
    if not all(math.isfinite(v) for row in vals for v in row):
        raise EngineError(f"llama-perplexity --kl-divergence printed a value that is not finite ({rows[-1].group(0).strip()})")
    mean = _KLD_MEAN.search(text)
    if not mean:
        raise EngineError("llama-perplexity --kl-divergence printed no final 'Mean KLD' line")
    kld = _per_chunk([v[1] for v in vals])
    mean_kld = float(mean.group(1))
    # the running means print 5 decimals: chunk i's value carries up to (2i-1)·5e-6 of rounding
    if abs(sum(kld) / len(kld) - mean_kld) > 1e-5 * len(kld) + 1e-6:
        raise EngineError(f"llama-perplexity --kl-divergence: per-chunk KLD averages {sum(kld) / len(kld):.6f}, "
                          f"not the final Mean KLD {mean_kld}; unknown output format")
    median, top = _KLD_MEDIAN.search(text), _SAME_TOP.search(text)
    return KldRun(chunk_kld=kld, chunk_log_ratio=_per_chunk([v[0] for v in vals]),
                  chunk_same_top=[v / 100 for v in _per_chunk([v[2] for v in vals])], mean_kld=mean_kld,
                  median_kld=float(median.group(1)) if median else None,
                  same_top_p=float(top.group(1)) / 100 if top else None, n_ctx=int(setup.group(2)))


def kld_chunks_printed(stdout: str, stderr: str) -> bool:
    setup = _KLD_SETUP.search(stdout + "\n" + stderr)
    printed = sum(1 for line in stdout.splitlines() if _KLD_CHUNK.match(line))
    return not setup or (printed >= int(setup.group(1)) and bool(_KLD_MEAN.search(stdout + stderr)))


def save_base_logits(llama: LlamaCpp, model: Path | str, text: Path | str, logits: Path, *,
                     ctx: int, chunks: int | None = None, threads: int | None = None,
                     timeout_s: float = 600, extra_args: Sequence[str] = ()) -> PerplexityRun:
    """Score ``text`` with the reference model and save its log-probabilities to ``logits``
    (written to a part file, renamed when the run succeeded)."""
    logits.parent.mkdir(parents=True, exist_ok=True)
    part = logits.with_name(logits.name + ".part")
    try:
        run = run_perplexity(llama, model, text, ctx=ctx, chunks=chunks, threads=threads, timeout_s=timeout_s,
                             extra_args=["--kl-divergence-base", str(part), *extra_args])
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    part.replace(logits)
    return run


def run_kld(llama: LlamaCpp, model: Path | str, logits: Path | str, *, ctx: int, chunks: int | None = None,
            threads: int | None = None, timeout_s: float = 600, extra_args: Sequence[str] = (),
            env: dict[str, str] | None = None) -> KldRun:
    """KL divergence of ``model`` against the base saved in ``logits`` (its tokens come from there).

    :raises EngineError: missing files, a failed or killed run, unparseable output, fewer chunks
        than asked — one line naming the model, the base and the command.
    """
    model, logits = Path(model), Path(logits)
    if not model.is_file():
        raise EngineError(f"model file {model} does not exist")
    if not logits.is_file():
        raise EngineError(f"base logits file {logits} does not exist (KLD of model {model.name})")
    cmd = [str(llama.llama_perplexity), "-m", str(model), "-c", str(ctx), "-b", str(ctx),
           "--kl-divergence-base", str(logits), "--kl-divergence"]
    if chunks is not None:
        cmd += ["--chunks", str(chunks)]
    if threads is not None:
        cmd += ["-t", str(threads)]
    cmd += [str(a) for a in extra_args]
    p = run_logged(cmd, timeout_s, env, complete=kld_chunks_printed)
    where = f"model {model.name}, base {logits.name}"
    fault = process_fault(p, "llama-perplexity --kl-divergence", where, cmd, timeout_s)
    if fault:
        raise engine_error(p, fault, log=log_tail(p.stderr))
    try:
        run = parse_kld(p.stdout, p.stderr)
    except EngineError as exc:
        raise EngineError(f"{exc} ({where}; command: {shlex.join(cmd)})", log=log_tail(p.stderr)) from None
    if chunks is not None and len(run.chunk_kld) != chunks:
        raise EngineError(f"llama-perplexity --kl-divergence on {where} scored {len(run.chunk_kld)} chunks, "
                          f"not the {chunks} asked for; command: {shlex.join(cmd)}", log=log_tail(p.stderr))
    run.cmd, run.wall_s, run.log = cmd, p.wall_s, log_tail(p.stderr)
    return run
