"""Laws are handed what they need: every method that may read a file or run an engine gets the run's
Resources, predict() included; a law keeps no run state, so core may call its methods in any order;
a law written for the old predict(anchor, profile) is refused at load with one line."""
from __future__ import annotations

import os
import shutil

import pytest

from lawbench.core.errors import PluginError
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.laws.law import Law, check_law_signatures
from lawbench.plugins.law4.law import Law4
from lawbench.testing import make_anchor

PROFILES = load_profiles()
PROV = {"seed": "000_4a91008eeaefec79.txt", "register_id": "L-01", "quote": "test", "band_rationale": "test"}
# Arm b calibrates η·BW (the cpu profile states none), arm a adds a KV term: priced from the real
# F16 file the store builds with gguf alone (no llama-quantize).
CALIBRATED = dict(
    id="law4.test.any-order", law="law4", claim="test", quantity="decode_ratio", unit="x", kind="agreement",
    band={"rel": 0.25}, profiles=["cpu"], provenance=PROV,
    budget={"min_samples": 3, "max_samples": 3, "batch": 1, "timeout_s": 120},
    case={"quantity": "decode_tok_s", "model": "gguf:syn-25m-f16", "calibrate": True, "bench": {"n_gen": 8}},
    arms={"a": {"bench": {"n_gen": 8, "depth": 512}}, "b": {}})


def _toolchain_or_skip() -> None:
    if os.environ.get("LAWBENCH_LLAMA_DIR"):
        return
    missing = [t for t in ("cmake", "c++") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"no C++ toolchain to build llama.cpp ({', '.join(missing)} not on PATH) "
                    "and no LAWBENCH_LLAMA_DIR")


@pytest.fixture
def own_box(tmp_path, monkeypatch):
    """A run's Resources on the pinned llama.cpp build (built once into the shared cache if it is
    missing), with a cache, model store and box lock of this test's own: nothing here is timed,
    so it neither waits for nor holds up another job's lock."""
    from lawbench.core.store import gguf_header
    from lawbench.core.engines.build import build_llamacpp
    from lawbench.core.engines.llamacpp import locate_llamacpp
    from lawbench.core.engines.record import DEFAULT_LLAMA_VERSION
    from lawbench.core.laws.resources import Resources

    _toolchain_or_skip()
    own = os.environ.get("LAWBENCH_LLAMA_DIR")
    llama = locate_llamacpp(own) if own else build_llamacpp(DEFAULT_LLAMA_VERSION, backend="cpu")
    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path))
    gguf_header.clear_memory_cache()
    res = Resources(profile=PROFILES["cpu"], engine=llama)
    try:
        yield res
    finally:
        res.close()
        gguf_header.clear_memory_cache()


@pytest.mark.integration
def test_law4_predicts_alike_before_after_and_without_its_sampler(own_box):
    """The old Law 4 kept the resources sampler() was handed and priced from them; core had to call
    sampler() first. Now predict() is handed them: the same number before the sampler exists, after
    it, on a fresh instance, and without resources once the file is on this machine."""
    anchor, cpu, res = make_anchor(**CALIBRATED), PROFILES["cpu"], own_box
    law = Law4()
    first = law.predict(anchor, cpu)  # no resources: an F16 synthetic is written by gguf alone
    before = law.predict(anchor, cpu, res)  # through the run's store, before any sampler
    sampler = law.sampler(anchor, cpu, res)
    after = law.predict(anchor, cpu, res)
    fresh = Law4().predict(anchor, cpu, res)
    without = Law4().predict(anchor, cpu)
    assert sampler.protocol()["models"]["a"].startswith(str(res.store().cache_dir))
    assert 0 < before.value < 1  # arm a reads the KV of 512 more positions a token: it is slower
    for other in (first, after, fresh, without):
        assert other.value == before.value and other.detail == before.detail
        assert other.from_reference(30.0) == before.from_reference(30.0)
    assert vars(law) == {}  # nothing of the run stays on the law


def test_a_law_without_resources_in_predict_is_refused_at_load():
    class OldLaw(Law):
        name = "old"

        def predict(self, anchor, profile):  # lawbench 0.1
            raise AssertionError("never called")

    with pytest.raises(PluginError, match=r"plugin x: law class .*OldLaw: predict\(\) does not take the run's "
                                          r"resources; write `def predict\(self, anchor, profile, resources=None\)`"):
        check_law_signatures(OldLaw, "plugin x")


def test_laws_that_take_resources_pass_the_load_check():
    class NewLaw(Law):
        name = "new"

        def predict(self, anchor, profile, resources=None):
            raise AssertionError("never called")

        def sampler(self, anchor, profile, resources):
            raise AssertionError("never called")

    check_law_signatures(NewLaw, "plugin x")
    check_law_signatures(Law4, "lawbench.plugins.law4")


def test_an_old_style_third_party_law_is_set_aside_naming_the_method():
    import types

    import lawbench
    from lawbench.testing import registered

    class OldLaw(Law):
        name = "oldlaw"
        title = "a law written for lawbench 0.1"

        def predict(self, anchor, profile):
            raise AssertionError("never called")

    module = types.ModuleType("old_law_plugin")
    module.lawbench_laws = lawbench.hookimpl(lambda: [OldLaw])
    with pytest.raises(PluginError, match=r"OldLaw: predict\(\) does not take the run's resources"):
        with registered(module):
            pass
