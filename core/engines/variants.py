"""An engine's opt-out of its defaults: llama-bench options and environment for every run of it.

An A/B (lawbench.core.run.ab) may compare an engine's default against its opt-out, e.g.
``llama.cpp+args=-fa 1`` (lawbench.core.engines.specs parses the spec). The options travel on the
LlamaCpp (``bench_args``, ``bench_env``) and ``run_bench`` adds them to every llama-bench command
of that engine through ``apply_engine_options``. The options an anchor itself decides (model, test
sizes, repetitions, output format) cannot be overridden, and an option the anchor's own command
already sets is refused: llama-bench would add the second value as another test, not replace the
first.
"""
from __future__ import annotations

from typing import Any, Optional

from lawbench.core.errors import EngineError

# llama-bench's short and long spellings of the options lawbench's commands use (bench_command).
ALIASES = {"-m": "--model", "-o": "--output", "-p": "--n-prompt", "-n": "--n-gen", "-r": "--repetitions",
           "-d": "--n-depth", "-pg": "--n-pg", "-ngl": "--n-gpu-layers", "-ctk": "--cache-type-k",
           "-ctv": "--cache-type-v", "-ub": "--ubatch-size", "-b": "--batch-size", "-t": "--threads",
           "-ncmoe": "--n-cpu-moe", "-ot": "--override-tensor", "-fa": "--flash-attn",
           "-nkvo": "--no-kv-offload", "-v": "--verbose", "-oe": "--output-err", "-h": "--help",
           "-hf": "--hf-repo", "-hfr": "--hf-repo", "-hff": "--hf-file", "-hft": "--hf-token",
           "-mu": "--model-url"}
# What an anchor decides: the model, the test, the repetitions, and how results are read.
# The Hugging Face and URL options pick a model too (and would download one).
RESERVED = {"--model", "--output", "--output-err", "--n-prompt", "--n-gen", "--n-pg", "--n-depth",
            "--repetitions", "--verbose", "--help", "--list-devices", "--progress",
            "--hf-repo", "--hf-file", "--hf-token", "--model-url"}


def canonical(flag: str) -> str:
    """One spelling per llama-bench option: ``-fa`` and ``--flash-attn`` are the same."""
    return ALIASES.get(flag, flag)


def is_option(word: str) -> bool:
    """A command-line word that names an option (``-fa``), not a value (``-1``)."""
    if not word.startswith("-"):
        return False
    try:
        float(word)
        return False
    except ValueError:
        return True


def apply_engine_options(llama: Any, cmd: list[str], env: Optional[dict]) -> tuple[list[str], Optional[dict]]:
    """A llama-bench command and environment with the engine's own options (+args=, +env=) added.

    :raises EngineError: an engine option that the command already sets (both values would run).
    """
    args = tuple(getattr(llama, "bench_args", ()) or ())
    extra_env = dict(getattr(llama, "bench_env", ()) or ())
    if not args and not extra_env:
        return cmd, env
    taken = {canonical(w) for w in cmd[1:] if is_option(w)}
    clash = [w for w in args if is_option(w) and canonical(w) in taken]
    if clash:
        raise EngineError(f"engine option {clash[0]} (+args=) is already set by the anchor's own "
                          f"command ({' '.join(cmd[1:])}); llama-bench would run both values: "
                          "drop it from the engine spec")
    return cmd + list(args), {**(env or {}), **extra_env}
