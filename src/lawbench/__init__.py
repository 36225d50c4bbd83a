"""lawbench — re-proves published performance laws of low-bit LLM inference on real hardware.

Writing a law plugin: everything you need is importable from ``lawbench`` itself and its public
modules; a law never imports ``lawbench.core`` (the built-in laws do not either).

1. Write a pydantic model of your anchors' ``case`` table (subclass ``lawbench.Strict``: unknown
   fields are errors; ``lawbench.FiniteFloat`` refuses NaN and infinities) and a ``lawbench.Law``
   subclass: ``name`` (lower-case, unique), ``title``, ``anchors_package`` (an importable package
   holding your ``*.toml`` anchor files, declared as package data) and ``case_model``.
   ``self.case(anchor)`` returns the validated case.
2. Implement what your law can do. Every method is handed the run's ``lawbench.Resources`` — the one
   engine build, the one model store, the box lock — and core calls them in any order, so a law
   keeps no run state between calls:
   ``predict(anchor, profile, resources=None) -> Prediction`` (runs anywhere; ``resources`` is None
   on a direct call outside a run: never download and never run an engine),
   ``sampler(anchor, profile, resources)`` (draws samples on a machine: ``ArmSampler`` over
   ``Visit`` callables does warm-up, interleaving and predecessors for you; ``InterleavedSampler``
   compares any number of arms a round by your own arithmetic) and/or
   ``census(anchor, profile, resources) -> Census`` (counted path labels). A law written for
   lawbench 0.1 (``predict(self, anchor, profile)``) is refused at load with a PluginError naming
   the method: add the ``resources=None`` parameter.
   ``resources.llama()`` is the llama.cpp build (``.bin_dir``, ``.llama_quantize`` …) to hand to
   ``lawbench.engines`` (llama-bench, -perplexity, -server …, and the process-group runner for an
   engine of your own); ``lawbench.store.model_file(case.model, resources)`` is the verified file
   of a model named ``gguf:<catalogue id>`` or ``path:<file>`` (``NotApplicable`` where it is not on
   this machine); ``read_gguf_header(path)`` reads a GGUF's metadata and tensor table in
   milliseconds; ``lawbench.hardware`` the machine's state. Raise ``NotApplicable`` for a SKIP with
   its reason (``OutOfScope(message, detail)`` when the anchor's own stated scope — your law's
   measured scope rule, the engine builds a figure is about — excludes the case here: a SKIP even
   on the anchor's own runner and under --strict), ``EngineError`` for an ERROR, ``DataError`` for a
   data problem (file ``ANCHOR_FILE``: core names the real one; ``validation_error`` words a
   pydantic error that way). Override ``check_anchor(anchor)`` for rules across fields;
   ``lawbench check`` runs it on every anchor.
   docs/contributing-a-law.md names every public name, module by module.
3. Register in a module of your package; hooks are listed in ``lawbench.core.laws.hookspecs``::

       import lawbench

       @lawbench.hookimpl
       def lawbench_laws():
           yield MyLaw

   Other hooks: ``lawbench_profile_dirs`` (hardware profiles), ``lawbench_model_catalogs``
   (models a case may name as ``gguf:<id>``), ``lawbench_commands`` (``lawbench.Command``
   sub-commands; ``lawbench.whole_number(0)`` and ``lawbench.number_between`` are argparse types;
   ``lawbench.host`` is what a command reads of the running lawbench), ``lawbench_run_finished``
   (exporters).
4. Point the entry-point group ``lawbench`` at that module in your ``pyproject.toml``::

       [project.entry-points.lawbench]
       mylaw = "lawbench_mylaw.plugin"

Name third-party distributions ``lawbench-<law>``. ``lawbench.testing`` has fixtures for your
tests. A plugin that fails to load is reported by its distribution name and set aside; the rest
keeps working. ``LAWBENCH_DISABLE_PLUGIN_AUTOLOAD=1`` loads built-in laws only;
``LAWBENCH_TRACE=1`` traces every hook call.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The public surface: name -> the module that defines it. Loaded on first use, so that
# `import lawbench` stays cheap and core's own modules may import `lawbench.__version__`.
_EXPORTS = {
    "Law": "lawbench.core.laws.law",
    "Prediction": "lawbench.core.laws.law",
    "Census": "lawbench.core.laws.law",
    "Sampler": "lawbench.core.laws.law",
    "MachineTerm": "lawbench.core.laws.law",
    "ANCHOR_FILE": "lawbench.core.errors",
    "LawbenchError": "lawbench.core.errors",
    "NotApplicable": "lawbench.core.errors",
    "OutOfScope": "lawbench.core.errors",
    "EngineOfRecordMissing": "lawbench.core.errors",
    "EngineError": "lawbench.core.errors",
    "EngineInterrupted": "lawbench.core.errors",
    "DataError": "lawbench.core.errors",
    "UsageError": "lawbench.core.errors",
    "PluginError": "lawbench.core.errors",
    "validation_error": "lawbench.core.errors",
    "hookimpl": "lawbench.core.laws.hookspecs",
    "Command": "lawbench.core.laws.command",
    "whole_number": "lawbench.core.laws.command",
    "number_between": "lawbench.core.laws.command",
    "Strict": "lawbench.core.models",
    "FiniteFloat": "lawbench.core.models",
    "Id": "lawbench.core.models",
    "Anchor": "lawbench.core.models",
    "HardwareProfile": "lawbench.core.models",
    "Fact": "lawbench.core.models",  # a number with its source: what a law's profile table holds
    "Sample": "lawbench.core.models",
    "RateSeries": "lawbench.core.models",  # what a measured arm is as a tracked speed (issue 31)
    "ArmSampler": "lawbench.core.stats.protocol",
    "InterleavedSampler": "lawbench.core.stats.protocol",
    "Visit": "lawbench.core.stats.protocol",
    "Resources": "lawbench.core.laws.resources",
    # the header of a GGUF file, for laws that read real model files (lawbench.store finds them)
    "read_gguf_header": "lawbench.core.store.gguf_header:read_header",
    "GGUFHeader": "lawbench.core.store.gguf_header",
}
__all__ = [  # spelled out for tools that read it statically; a test keeps it equal to _EXPORTS
    "__version__", "Law", "Prediction", "Census", "Sampler", "MachineTerm", "ANCHOR_FILE", "LawbenchError", "NotApplicable",
    "OutOfScope", "EngineOfRecordMissing", "EngineError", "EngineInterrupted", "DataError", "UsageError",
    "PluginError", "validation_error", "hookimpl", "Command", "whole_number", "number_between",
    "Strict", "FiniteFloat", "Id", "Anchor", "HardwareProfile", "Fact", "Sample", "RateSeries", "ArmSampler",
    "InterleavedSampler", "Visit",
    "Resources", "read_gguf_header", "GGUFHeader",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lawbench' has no attribute {name!r}")
    module, _, attr = module.partition(":")  # "module:attr" when the public name differs
    value = getattr(importlib.import_module(module), attr or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # for editors and type checkers: the same names, eagerly
    from lawbench.core.laws.command import Command, number_between, whole_number
    from lawbench.core.errors import (
        ANCHOR_FILE,
        DataError,
        EngineError,
        EngineInterrupted,
        EngineOfRecordMissing,
        LawbenchError,
        NotApplicable,
        OutOfScope,
        PluginError,
        UsageError,
        validation_error,
    )
    from lawbench.core.store.gguf_header import GGUFHeader
    from lawbench.core.store.gguf_header import read_header as read_gguf_header
    from lawbench.core.laws.hookspecs import hookimpl
    from lawbench.core.laws.law import Census, Law, MachineTerm, Prediction, Sampler
    from lawbench.core.models import Anchor, Fact, FiniteFloat, HardwareProfile, Id, Sample, Strict
    from lawbench.core.stats.protocol import ArmSampler, InterleavedSampler, Visit
    from lawbench.core.laws.resources import Resources
