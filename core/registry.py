"""The plugin host: hookspecs, built-in laws, third-party laws from the `lawbench` entry points.

As plain as pluggy's eggsample: add_hookspecs, load entry points, register built-ins. What the
hooks yield is validated here, and an error names the distribution that yielded it.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Optional

import pluggy

from lawbench.core import hookspecs
from lawbench.core.law import Law, LawbenchError

# Built-ins are module names, not entry points (pytest's habit): they load even when autoloading
# third-party plugins is disabled.
BUILTIN_PLUGINS = (
    "lawbench.plugins.law1",
    "lawbench.plugins.law4",
    "lawbench.plugins.minfer",
)
ENTRY_POINT_GROUP = "lawbench"
DISABLE_ENV = "LAWBENCH_DISABLE_PLUGIN_AUTOLOAD"
TRACE_ENV = "LAWBENCH_TRACE"


class PluginError(LawbenchError):
    """A plugin registered something malformed or duplicate."""


@dataclass
class Registry:
    pm: pluggy.PluginManager
    laws: dict[str, Law] = field(default_factory=dict)
    law_origin: dict[str, str] = field(default_factory=dict)  # law name -> distribution / module
    profile_dirs: list[Any] = field(default_factory=list)

    def law(self, name: str) -> Law:
        try:
            return self.laws[name]
        except KeyError:
            raise PluginError(
                f"no law named {name!r} is registered (known: {', '.join(sorted(self.laws)) or 'none'})"
            ) from None


def _autoload_disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def make_plugin_manager(autoload: Optional[bool] = None, extra: tuple[Any, ...] = ()) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if autoload is None:
        autoload = not _autoload_disabled()
    if autoload:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    for name in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    for plugin in extra:
        pm.register(plugin)
    pm.check_pending()
    if os.environ.get(TRACE_ENV):
        pm.trace.root.setwriter(lambda msg: print(msg, end=""))
        pm.enable_tracing()
    return pm


def _origin(pm: pluggy.PluginManager, plugin: object, plugin_name: str) -> str:
    """Name the distribution that registered a plugin, or the module for built-ins."""
    for registered, dist in pm.list_plugin_distinfo():
        if registered is plugin:
            return f"distribution {dist.project_name} {dist.version} (plugin {plugin_name})"
    return f"plugin {plugin_name}"


def build_registry(pm: pluggy.PluginManager) -> Registry:
    reg = Registry(pm=pm)
    # Call each implementation on its own so an error can name the one that misbehaved.
    for impl in pm.hook.lawbench_laws.get_hookimpls():
        origin = _origin(pm, impl.plugin, impl.plugin_name)
        try:
            yielded = list(impl.function() or ())
        except Exception as exc:  # a broken plugin must not take the run down with a traceback
            raise PluginError(f"{origin}: lawbench_laws() raised {type(exc).__name__}: {exc}") from exc
        for item in yielded:
            law = _instantiate(item, origin)
            name = law.name
            if not name or name != name.lower() or not name.replace("_", "").replace("-", "").isalnum():
                raise PluginError(f"{origin}: law {type(law).__name__} has an invalid name {name!r} "
                                  "(want a non-empty lower-case name like 'law4')")
            if name in reg.laws:
                raise PluginError(f"{origin}: law name {name!r} is already registered by "
                                  f"{reg.law_origin[name]}")
            reg.laws[name] = law
            reg.law_origin[name] = origin
    for impl in pm.hook.lawbench_profile_dirs.get_hookimpls():
        origin = _origin(pm, impl.plugin, impl.plugin_name)
        try:
            reg.profile_dirs.extend(impl.function() or ())
        except Exception as exc:
            raise PluginError(f"{origin}: lawbench_profile_dirs() raised {type(exc).__name__}: {exc}") from exc
    reg.laws = dict(sorted(reg.laws.items()))
    return reg


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
        _cached = build_registry(make_plugin_manager())
    return _cached
