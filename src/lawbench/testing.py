"""Fixtures and helpers for testing a law plugin (ours or a third party's).

In your tests' conftest.py::

    pytest_plugins = ["lawbench.testing"]

then use ``make_profile``, ``make_anchor``, ``evaluate_anchor`` and the ``lawbench_plugin``
fixture, which registers a plugin for one test and always unregisters it.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import pytest

from lawbench.core.evaluate import RunPolicy, evaluate
from lawbench.core.law import Law
from lawbench.core.models import Anchor, HardwareProfile, Result


def make_profile(id: str = "test-box", *, ram_gbs: float = 20.0, eta_ram: float = 0.6,
                 generic: bool = True, **extra: Any) -> HardwareProfile:
    """A one-tier CPU profile whose every fact is labelled as a test fixture."""
    src = "lawbench.testing fixture"
    data: dict[str, Any] = {
        "id": id, "description": "test fixture profile",
        "fingerprint": {"generic": generic},
        "tiers": [{"name": "ram", "kind": "ram", "capacity_gb": {"value": 16, "source": src},
                   "bandwidth_spec_gbs": {"value": ram_gbs, "source": src}}],
        "eta": {"ram": {"value": eta_ram, "source": src, "basis": "spec"}},
    }
    data.update(extra)
    return HardwareProfile.model_validate(data)


def make_anchor(**fields: Any) -> Anchor:
    """An anchor with sensible defaults for the fields a test does not care about."""
    data: dict[str, Any] = {
        "id": "test.anchor", "law": "test", "claim": "a test claim", "quantity": "x", "unit": "1",
        "kind": "prediction", "value": 1.0, "band": {"rel": 0.05},
        "provenance": {"seed": "test", "notes": "lawbench.testing fixture"},
    }
    data.update(fields)
    return Anchor.model_validate(data)


def evaluate_anchor(anchor: Anchor, law: Law, *, profile: Optional[HardwareProfile] = None,
                    on_own_runner: bool = True, strict: bool = False, resources: Any = None) -> Result:
    """Run one anchor through core's real verdict logic, as `lawbench run` would."""
    profile = profile or make_profile()
    policy = RunPolicy(profile=profile, profiles={profile.id: profile}, on_own_runner=on_own_runner,
                       strict=strict)
    return evaluate(anchor, law, policy, resources)


@contextlib.contextmanager
def registered(plugin: Any, name: Optional[str] = None) -> Iterator[Any]:
    """Register a plugin module/object into a fresh registry for the duration of the block.

    A plugin `lawbench` would set aside as broken raises PluginError here, so its author sees why.
    """
    from lawbench.core.errors import PluginError
    from lawbench.core.registry import build_registry, make_plugin_manager

    pm = make_plugin_manager(autoload=False)
    pm.register(plugin, name=name)
    try:
        registry = build_registry(pm)
        if registry.broken:
            raise PluginError("; ".join(registry.broken))
        yield registry
    finally:
        pm.unregister(plugin)


@pytest.fixture
def lawbench_plugin():
    """``with lawbench_plugin(my_module) as registry: ...`` — registered for this test only."""
    return registered


@pytest.fixture
def private_lawbench_cache(tmp_path_factory, monkeypatch):
    """An empty ``$LAWBENCH_CACHE`` (header cache in memory and on disk) for one test."""
    from lawbench.core import gguf_header

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path_factory.mktemp("cache")))
    gguf_header.clear_memory_cache()
    yield
    gguf_header.clear_memory_cache()
