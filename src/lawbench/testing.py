"""Fixtures and helpers for testing a law plugin (ours or a third party's).

In your tests' conftest.py::

    pytest_plugins = ["lawbench.testing"]

then use ``make_profile``, ``make_anchor``, ``evaluate_anchor``, ``law_anchors`` (the anchors
your law ships, checked as ``lawbench check`` checks them), the ``lawbench_plugin`` fixture, which
registers a plugin for one test and always unregisters it, and the ``lawbench_resources`` fixture
(the real model files and llama.cpp build a run hands your sampler).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import pytest

from lawbench.core.run.evaluate import RunPolicy, evaluate
from lawbench.core.laws.law import Law
from lawbench.core.models import Anchor, HardwareProfile, Result

__all__ = ["evaluate_anchor", "law_anchors", "lawbench_plugin", "lawbench_resources", "make_anchor", "make_profile",
           "private_lawbench_cache", "registered"]


def make_profile(id: str = "test-box", *, ram_gbs: float = 20.0, generic: bool = True,
                 **extra: Any) -> HardwareProfile:
    """A one-tier CPU profile whose every fact is labelled as a test fixture.

    A law's own constants go in ``laws={"<law>": {...}}`` (its ``[laws.<law>]`` table), other
    fields likewise by name.
    """
    src = "lawbench.testing fixture"
    data: dict[str, Any] = {
        "id": id, "description": "test fixture profile",
        "fingerprint": {"generic": generic},
        "tiers": [{"name": "ram", "kind": "ram", "capacity_gb": {"value": 16, "source": src},
                   "bandwidth_spec_gbs": {"value": ram_gbs, "source": src}}],
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
    """Run one anchor through core's real verdict logic, as `lawbench run` would.

    :raises PluginError: the law's methods do not take the run's resources, as loading it would
        (``predict(self, anchor, profile)`` is lawbench 0.1's: add ``resources=None``).
    """
    from lawbench.core.laws.law import check_law_signatures

    check_law_signatures(type(law), f"law {law.name!r}")
    profile = profile or make_profile()
    policy = RunPolicy(profile=profile, profiles={profile.id: profile}, on_own_runner=on_own_runner,
                       strict=strict)
    return evaluate(anchor, law, policy, resources)


def law_anchors(law: Law) -> dict[str, Anchor]:
    """The anchors ``law`` ships in its ``anchors_package``, by id: each file validated and each
    anchor checked by ``law.check_anchor``, as ``lawbench check`` does. A problem raises
    DataError naming the file, the anchor and the field."""
    from lawbench.core.errors import DataError
    from lawbench.core.claims.loading import load_anchors

    files = list(law.anchor_files())
    if law.anchors_package and not files:
        raise DataError(law.anchors_package, "holds no *.toml anchor files; declare them as package "
                                             "data in your pyproject ([tool.setuptools.package-data])")
    found: dict[str, Anchor] = {}
    for loaded in load_anchors(files).anchors:
        anchor = loaded.anchor
        if anchor.law != law.name:
            raise DataError(loaded.file, f"law {anchor.law!r} in the anchors of law {law.name!r}",
                            anchor=anchor.id, field="law")
        try:
            if anchor.harness is None:  # a register-harness anchor is core's: the Anchor model checked it
                law.check_anchor(anchor)
        except DataError as exc:
            raise exc.located(loaded.file, anchor.id) from None
        found[anchor.id] = anchor
    return found


@contextlib.contextmanager
def registered(plugin: Any, name: Optional[str] = None) -> Iterator[Any]:
    """Register a plugin module/object into a fresh registry for the duration of the block.

    A plugin `lawbench` would set aside as broken raises PluginError here, so its author sees why.
    """
    from lawbench.core.errors import PluginError
    from lawbench.core.laws.registry import build_registry, make_plugin_manager

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
    from lawbench.core.store import gguf_header

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path_factory.mktemp("cache")))
    gguf_header.clear_memory_cache()
    yield
    gguf_header.clear_memory_cache()


@pytest.fixture
def lawbench_resources():
    """What ``lawbench run`` hands a sampler (``lawbench.Resources``), for one test:
    ``.model("<catalogue id>")`` fetches and verifies a catalogue model once into the cache,
    ``.llama()`` is the pinned llama.cpp build (built on first use: minutes). It holds the box
    lock from first use until the test ends, like a run."""
    from lawbench.core.laws.resources import Resources

    resources = Resources()
    try:
        yield resources
    finally:
        resources.close()
