"""The plugin host: hookspecs, built-in laws, third-party laws from the `lawbench` entry points.

As plain as pluggy's eggsample: add_hookspecs, load entry points, register built-ins. What the
hooks yield is validated here. A third-party plugin that fails to import, registers a malformed
hook or yields something malformed is *broken*: it is set aside whole, reported once by its
distribution name, and every other plugin keeps working (`lawbench check` exits 2 on it).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pluggy

from lawbench.core.laws import hookspecs
from lawbench.core.laws.command import GROUPS, NAME_RE, Command
from lawbench.core.errors import PluginError
from lawbench.core.hardware.profiles import PROFILE_DIRS_ENV
from lawbench.core.store.catalog import use_plugin_catalogs
from lawbench.core.laws.law import Law, check_law_signatures

# Built-ins are module names, not entry points (pytest's habit): they load even when autoloading
# third-party plugins is disabled.
BUILTIN_PLUGINS = (
    "lawbench.plugins.law1",
    "lawbench.plugins.law3",
    "lawbench.plugins.law4",
    "lawbench.plugins.quality",
    "lawbench.plugins.minfer",
)
ENTRY_POINT_GROUP = "lawbench"
DISABLE_ENV = "LAWBENCH_DISABLE_PLUGIN_AUTOLOAD"
TRACE_ENV = "LAWBENCH_TRACE"


@dataclass
class Registry:
    pm: pluggy.PluginManager
    laws: dict[str, Law] = field(default_factory=dict)
    law_origin: dict[str, str] = field(default_factory=dict)  # law name -> distribution / module
    profile_dirs: list[Any] = field(default_factory=list)
    profile_dir_origins: list[str] = field(default_factory=list)  # who yielded each folder
    model_catalogs: list[Any] = field(default_factory=list)
    commands: dict[str, Command] = field(default_factory=dict)
    command_origin: dict[str, str] = field(default_factory=dict)
    broken: list[str] = field(default_factory=list)  # one line per plugin set aside, for people
    builtin_laws: set[str] = field(default_factory=set)  # laws lawbench ships: never set aside
    origins: dict[int, str] = field(default_factory=dict)  # id(plugin) -> its origin

    def law(self, name: str) -> Law:
        try:
            return self.laws[name]
        except KeyError:
            raise PluginError(
                f"no law named {name!r} is registered (known: {', '.join(sorted(self.laws)) or 'none'})"
            ) from None

    def report(self, problem: str) -> None:
        """A plugin that is partly broken (its anchors cannot be read): noted once, for people."""
        if problem not in self.broken:
            self.broken.append(problem)

    def origin_of(self, law: Law) -> str:
        return self.law_origin.get(law.name, f"law {law.name}")


def _autoload_disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip().lower() not in ("", "0", "false", "no")


@dataclass
class _Loaded:
    pm: pluggy.PluginManager
    origins: dict[int, str]
    broken: list[str]


def _dist_label(dist: importlib.metadata.Distribution) -> str:
    return f"distribution {dist.metadata['name']} {dist.version}"


def _entry_points() -> list[tuple[importlib.metadata.EntryPoint, importlib.metadata.Distribution]]:
    """Every `lawbench` entry point, each under its distribution: two distributions may both
    name theirs "plugin". A distribution found twice on sys.path counts once."""
    unique: dict[tuple[str, str], tuple[importlib.metadata.EntryPoint, importlib.metadata.Distribution]] = {}
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group == ENTRY_POINT_GROUP:
                unique.setdefault((_dist_name(dist), ep.name), (ep, dist))
    return [unique[key] for key in sorted(unique)]


def _dist_name(dist: importlib.metadata.Distribution) -> str:
    return str(dist.metadata["name"] or "?").lower().replace("_", "-")


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _register(pm: pluggy.PluginManager, plugin: Any, name: str) -> None:
    """Register one plugin and check its hooks now, so a bad one is set aside on its own."""
    pm.register(plugin, name=name)
    try:
        pm.check_pending()
    except Exception:
        pm.unregister(plugin)
        raise


def load_plugins(autoload: Optional[bool] = None, extra: tuple[Any, ...] = ()) -> _Loaded:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    origins: dict[int, str] = {}
    broken: list[str] = []
    for name in BUILTIN_PLUGINS:  # our own: a failure here is lawbench's bug and must be loud
        module = importlib.import_module(name)
        pm.register(module, name=name)
        origins[id(module)] = f"plugin {name}"
    if autoload is None:
        autoload = not _autoload_disabled()
    for ep, dist in _entry_points() if autoload else ():
        origin = f"{_dist_label(dist)} (entry point {ep.name} = {ep.value})"
        name = f"{_dist_name(dist)}:{ep.name}"  # unique per distribution, never a built-in's name
        if pm.is_blocked(ep.name) or pm.is_blocked(name):
            continue
        try:
            plugin = ep.load()
            _register(pm, plugin, name)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # even SystemExit at import: one plugin never ends the command
            broken.append(f"{origin}: could not load: {_one_line(exc)}")
            continue
        origins[id(plugin)] = origin
    for plugin in extra:
        name = getattr(plugin, "__name__", None) or repr(plugin)
        try:
            _register(pm, plugin, name)
        except Exception as exc:
            broken.append(f"plugin {name}: {_one_line(exc)}")
            continue
        origins[id(plugin)] = f"plugin {name}"
    pm.check_pending()
    if os.environ.get(TRACE_ENV):
        pm.trace.root.setwriter(lambda msg: print(msg, end="", file=sys.stderr))
        pm.enable_tracing()
    return _Loaded(pm, origins, broken)


def make_plugin_manager(autoload: Optional[bool] = None, extra: tuple[Any, ...] = ()) -> pluggy.PluginManager:
    return load_plugins(autoload, extra).pm


def _collect(impl: Any, origin: str, hook: str) -> list[Any]:
    try:
        got = list(impl.function() or ())
    except Exception as exc:
        raise PluginError(f"{origin}: {hook}() raised {_one_line(exc)}") from exc
    if os.environ.get(TRACE_ENV):
        print(f"lawbench trace: {hook}() of {origin} yielded {got!r}", file=sys.stderr)
    return got


def _is_folder_or_file(item: Any) -> bool:
    """What a profile or catalogue hook may yield: a path or an importlib.resources Traversable."""
    return isinstance(item, (str, os.PathLike)) or (hasattr(item, "iterdir") and hasattr(item, "read_text"))


def _contributions(impl_plugin: Any, pm: pluggy.PluginManager, origin: str) -> dict[str, list[Any]]:
    """Everything one plugin yields, validated on its own (so a bad plugin is set aside whole)."""
    out: dict[str, list[Any]] = {}
    for hook in ("lawbench_laws", "lawbench_profile_dirs", "lawbench_model_catalogs", "lawbench_commands"):
        items: list[Any] = []
        for impl in getattr(pm.hook, hook).get_hookimpls():
            if impl.plugin is impl_plugin:
                items.extend(_collect(impl, origin, hook))
        out[hook] = items
    out["lawbench_laws"] = [_instantiate(item, origin) for item in out["lawbench_laws"]]
    for law in out["lawbench_laws"]:
        name = law.name
        if not isinstance(name, str) or not name or name != name.lower() \
                or not name.replace("_", "").replace("-", "").isalnum():
            raise PluginError(f"{origin}: law {type(law).__name__} has an invalid name {name!r} "
                              "(want a non-empty lower-case name like 'law4')")
        package = law.anchors_package
        if package is not None and not isinstance(package, str):
            raise PluginError(f"{origin}: law {name!r}: anchors_package must be a package name, not {package!r}")
        check_law_signatures(type(law), origin)
    for hook in ("lawbench_profile_dirs", "lawbench_model_catalogs"):
        for item in out[hook]:
            if not _is_folder_or_file(item):
                raise PluginError(f"{origin}: {hook}() yielded {item!r}: want a path or an "
                                  "importlib.resources folder")
    for cmd in out["lawbench_commands"]:
        if not isinstance(cmd, Command):
            raise PluginError(f"{origin}: lawbench_commands() yielded {cmd!r}, which is not a lawbench.Command")
        if not NAME_RE.match(cmd.name):
            raise PluginError(f"{origin}: command name {cmd.name!r} must be lower-case letters, digits or '-'")
        if " " in cmd.name and cmd.name.split()[0] not in GROUPS:
            raise PluginError(f"{origin}: command {cmd.name!r}: a two-word name joins one of lawbench's command "
                              f"groups ({', '.join(GROUPS)}), not {cmd.name.split()[0]!r}")
        try:  # on a scratch parser first: a command whose arguments break must not break `lawbench`
            cmd.add_arguments(argparse.ArgumentParser(prog=f"lawbench {cmd.name}", add_help=True))
        except Exception as exc:
            raise PluginError(f"{origin}: command {cmd.name!r}: add_arguments raised {_one_line(exc)}") from exc
    return out


def build_registry(pm: pluggy.PluginManager, origins: Optional[dict[int, str]] = None,
                   broken: Optional[list[str]] = None) -> Registry:
    reg = Registry(pm=pm, broken=list(broken or []))
    reg.origins = dict(origins or {})
    # Built-ins first, in their own order: a third party that takes a built-in's name is the one set aside.
    order = {name: i for i, name in enumerate(BUILTIN_PLUGINS)}
    plugins = sorted(pm.list_name_plugin(), key=lambda np: (order.get(np[0], len(order)), np[0]))
    for plugin_name, plugin in plugins:
        origin = reg.origins.get(id(plugin), f"plugin {plugin_name}")
        builtin = plugin_name in BUILTIN_PLUGINS
        try:
            got = _contributions(plugin, pm, origin)
            _check_names(reg, got, origin)
        except Exception as exc:
            if builtin:
                raise
            problem = str(exc) if isinstance(exc, PluginError) else f"{origin}: {_one_line(exc)}"
            reg.broken.append(f"{problem} (set aside: its laws, profiles and commands are not available)")
            continue
        for law in got["lawbench_laws"]:
            reg.laws[law.name] = law
            reg.law_origin[law.name] = origin
            if builtin:
                reg.builtin_laws.add(law.name)
        for cmd in got["lawbench_commands"]:
            if cmd.name in reg.commands:  # the command alone is set aside: the plugin's laws still load
                reg.report(f"{origin}: command {cmd.name!r} is already added by {reg.command_origin[cmd.name]} "
                           "(set aside: the first one runs)")
                continue
            reg.commands[cmd.name] = cmd
            reg.command_origin[cmd.name] = origin
        reg.profile_dirs.extend(got["lawbench_profile_dirs"])
        reg.profile_dir_origins.extend([origin] * len(got["lawbench_profile_dirs"]))
        reg.model_catalogs.extend(got["lawbench_model_catalogs"])
    # A contributor's own profiles (e.g. what `lawbench profiles measure` wrote) join as a plugin's
    # would: every command and the pytest process of `lawbench run` read the same variable.
    named = dict.fromkeys(Path(f).expanduser() for f in os.environ.get(PROFILE_DIRS_ENV, "").split(os.pathsep) if f)
    for folder in named:  # a folder named twice is read once, not reported as its own duplicate
        reg.profile_dirs.append(folder)
        reg.profile_dir_origins.append(f"{PROFILE_DIRS_ENV} folder {folder}")
    reg.laws = dict(sorted(reg.laws.items()))
    return reg


def _check_names(reg: Registry, got: dict[str, list[Any]], origin: str) -> None:
    for law in got["lawbench_laws"]:
        if law.name in reg.laws:
            raise PluginError(f"{origin}: law name {law.name!r} is already registered by "
                              f"{reg.law_origin[law.name]}")


def _instantiate(item: Any, origin: str) -> Law:
    if isinstance(item, type) and issubclass(item, Law):
        try:
            return item()
        except Exception as exc:
            raise PluginError(f"{origin}: could not create law {item.__name__}: {exc}") from exc
    if isinstance(item, Law):
        return item
    raise PluginError(f"{origin}: lawbench_laws() yielded {item!r}, which is not a Law subclass or instance")


_cached: Optional[Registry] = None


def get_registry(refresh: bool = False) -> Registry:
    """The process-wide registry (built on first use)."""
    global _cached
    if _cached is None or refresh:
        loaded = load_plugins()
        _cached = build_registry(loaded.pm, loaded.origins, loaded.broken)
        use_plugin_catalogs(_cached.model_catalogs)  # the store is handed the plugins' catalogues
    return _cached
