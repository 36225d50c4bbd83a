"""lawbench — re-proves published performance laws of low-bit LLM inference on real hardware.

Writing a law plugin: everything you need is importable from ``lawbench`` itself.

1. Write a pydantic model of your anchors' ``case`` table (subclass ``lawbench.Strict``: unknown
   fields are errors; ``lawbench.FiniteFloat`` refuses NaN and infinities) and a ``lawbench.Law`` subclass: ``name`` (lower-case, unique), ``title``,
   ``anchors_package`` (an importable package holding your ``*.toml`` anchor files, declared as
   package data) and ``case_model``. ``self.case(anchor)`` returns the validated case.
2. Implement what your law can do: ``predict(anchor, profile) -> Prediction`` (runs anywhere),
   ``sampler(anchor, profile, resources)`` (draws samples on a machine: ``ArmSampler`` over
   ``Visit`` callables does warm-up, interleaving and predecessors for you) and/or
   ``census(anchor, profile, resources) -> Census`` (counted path labels). ``resources`` is
   the run's ``lawbench.Resources``: ``resources.model("<catalogue id>")`` is a verified model
   file (raises ``ModelUnavailable`` where it is not on this machine: raise ``NotApplicable``
   from it), ``resources.llama()`` the llama.cpp build (``.bin_dir``, ``.llama_quantize`` …);
   ``read_gguf_header(path)`` reads a GGUF's metadata and tensor table in milliseconds. Raise
   ``NotApplicable`` for a SKIP with its reason (``OutOfScope(message, detail)`` when your law's own
   stated, measured scope rule puts the case outside it: a SKIP even on the anchor's own runner and
   under --strict), ``EngineError`` for an ERROR, ``DataError``
   for a data problem (file ``ANCHOR_FILE``: core names the real one). Override
   ``check_anchor(anchor)`` for rules across fields; ``lawbench check`` runs it on every anchor.
3. Register in a module of your package; hooks are listed in ``lawbench.core.hookspecs``::

       import lawbench

       @lawbench.hookimpl
       def lawbench_laws():
           yield MyLaw

   Other hooks: ``lawbench_profile_dirs`` (hardware profiles), ``lawbench_model_catalogs``
   (models a case may name as ``gguf:<id>``), ``lawbench_commands`` (``lawbench.Command``
   sub-commands; ``lawbench.whole_number(0)`` is an argparse type for counts), ``lawbench_run_finished`` (exporters).
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
    "Law": "lawbench.core.law",
    "Prediction": "lawbench.core.law",
    "Census": "lawbench.core.law",
    "Sampler": "lawbench.core.law",
    "ANCHOR_FILE": "lawbench.core.errors",
    "LawbenchError": "lawbench.core.errors",
    "NotApplicable": "lawbench.core.errors",
    "NotThisEngine": "lawbench.core.errors",
    "OutOfScope": "lawbench.core.errors",
    "EngineError": "lawbench.core.errors",
    "EngineInterrupted": "lawbench.core.errors",
    "DataError": "lawbench.core.errors",
    "UsageError": "lawbench.core.errors",
    "PluginError": "lawbench.core.errors",
    "hookimpl": "lawbench.core.hookspecs",
    "Command": "lawbench.core.commands",
    "whole_number": "lawbench.core.commands",
    "Strict": "lawbench.core.models",
    "FiniteFloat": "lawbench.core.models",
    "Anchor": "lawbench.core.models",
    "HardwareProfile": "lawbench.core.models",
    "Sample": "lawbench.core.models",
    "ArmSampler": "lawbench.core.protocol",
    "Visit": "lawbench.core.protocol",
    # For laws that read real model files: the model a case names (Resources.model raises this
    # when the file is not on this machine: a SKIP, not an ERROR) and the header of a GGUF file.
    "Resources": "lawbench.core.resources",
    "ModelUnavailable": "lawbench.core.store.real",
    "read_gguf_header": "lawbench.core.gguf_header:read_header",
    "GGUFHeader": "lawbench.core.gguf_header",
}
__all__ = [  # spelled out for tools that read it statically; a test keeps it equal to _EXPORTS
    "__version__", "Law", "Prediction", "Census", "Sampler", "ANCHOR_FILE", "LawbenchError", "NotApplicable",
    "NotThisEngine", "OutOfScope", "EngineError", "EngineInterrupted", "DataError", "UsageError", "PluginError", "hookimpl", "Command", "whole_number",
    "Strict", "FiniteFloat", "Anchor", "HardwareProfile", "Sample", "ArmSampler", "Visit",
    "Resources", "ModelUnavailable", "read_gguf_header", "GGUFHeader",
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
    from lawbench.core.commands import Command, whole_number
    from lawbench.core.errors import (
        ANCHOR_FILE,
        DataError,
        EngineError,
        EngineInterrupted,
        LawbenchError,
        NotApplicable,
        NotThisEngine,
        PluginError,
        UsageError,
    )
    from lawbench.core.gguf_header import GGUFHeader
    from lawbench.core.gguf_header import read_header as read_gguf_header
    from lawbench.core.hookspecs import hookimpl
    from lawbench.core.law import Census, Law, Prediction, Sampler
    from lawbench.core.models import Anchor, FiniteFloat, HardwareProfile, Sample, Strict
    from lawbench.core.protocol import ArmSampler, Visit
    from lawbench.core.resources import Resources
    from lawbench.core.store.real import ModelUnavailable
