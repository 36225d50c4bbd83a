"""Every hook lawbench calls. Change a hookspec only by adding keyword arguments.

Hooks *yield records*; the registry validates what they yield (unique lower-case names, the
offending distribution named in the error) — plugins never answer "not mine".
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

import pluggy

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from lawbench.core.laws.command import Command
    from lawbench.core.laws.law import Law
    from lawbench.core.run.outputs import RunOutputs

PROJECT = "lawbench"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def lawbench_laws() -> "Iterable[type[Law] | Law]":
    """Yield the laws this plugin provides, as Law subclasses or instances.

    Every result counts; the registry rejects a law whose ``name`` is empty, not lower-case, or
    already taken, naming the distribution that registered it.

    :return: an iterable of :class:`lawbench.core.laws.law.Law` subclasses or instances.
    """


@hookspec
def lawbench_profile_dirs() -> "Iterable[Traversable]":
    """Yield folders (importlib.resources Traversables or paths) holding hardware-profile TOML.

    Lets a contributor ship a profile for their machine in a plugin package. A profile id defined
    twice is an error naming both files.

    :return: an iterable of folders; every ``*.toml`` in each is one profile.
    """


@hookspec
def lawbench_model_catalogs() -> "Iterable[Traversable]":
    """Yield model-catalogue TOML files (``[[model]]`` real files, ``[[synthetic]]`` factory specs).

    A case may then name a model as ``gguf:<id>``; the store fetches or builds it with checksums.
    A model id declared twice is an error naming both files.

    :return: an iterable of files (importlib.resources Traversables or paths).
    """


@hookspec
def lawbench_commands() -> "Iterable[Command]":
    """Yield :class:`lawbench.Command` records: sub-commands of ``lawbench`` a law brings
    (Law 4 brings ``predict``).

    A name already taken by core or another plugin is an error naming the distribution.

    :return: an iterable of :class:`lawbench.Command`.
    """


@hookspec
def lawbench_run_finished(record: Any, outputs: "RunOutputs") -> None:
    """Called once after a run (`lawbench run`, `ab`, `census plant`) with its finished record
    (lawbench.core.models.run_record.RunRecord):
    every output of a run is an implementation of this hook. lawbench's own — run.json, the
    history row, the step summary, report.html (lawbench.core.run.outputs) — are called first, in
    that order, then every other plugin's, one at a time.

    Return values are ignored; an exception is one line naming the plugin and changes no verdict.

    :param record: the finished run record.
    :param outputs: where the run's outputs go (lawbench.core.run.outputs.RunOutputs): its
        ``folder`` (the --out folder, None when the run writes no files), ``written`` (output
        name -> path, e.g. "run.json", filled as lawbench's own are written), ``wrote(name, path)``
        and ``failed(problem)``, which names an output that could not be written and makes the
        run's exit code at least 1.
    """
