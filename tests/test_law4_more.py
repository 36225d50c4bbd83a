"""Law 4's issue-9 additions: L-19's k from a per-layer cost, L-16's scale+min density from ggml's
block layouts, and the page-cache priming step (bench.prime, register D-29) reaching each visit.

Expected values are arithmetic written out here from the published inputs, never copied from
the code; the block layouts are also re-read from the pinned llama.cpp source when it is cached.
"""
from __future__ import annotations

import os
import re
from importlib import resources as ir

import pytest

from lawbench.core.errors import DataError
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.claims.loading import load_anchors
from lawbench.core.stats.protocol import ArmSampler, Visit
from lawbench.plugins.law4 import measure
from lawbench.plugins.law4.bench_case import BenchCase
from lawbench.plugins.law4.case import Law4Case
from lawbench.plugins.law4.law import Law4
from lawbench.testing import make_anchor

PROFILES = load_profiles()
LAW = Law4()
PROV = {"seed": "000_4a91008eeaefec79.txt", "quote": "test", "band_rationale": "test"}


def predict(case: dict, unit: str = "x") -> float:
    anchor = make_anchor(id="law4.test", law="law4", claim="test", quantity=case["quantity"], unit=unit,
                         kind="prediction", value=1.0, band={"rel": 0.5}, provenance=PROV, case=case)
    LAW.check_anchor(anchor)
    return LAW.predict(anchor, PROFILES["cpu"]).value


# --------------------------------------------------------------------------- L-19's k from U-25's costs


@pytest.mark.parametrize("cost_ms, depth, seed_k", [(23.5, 16384, 1.43), (46.7, 32768, 1.42)])
def test_k_from_a_per_layer_cost_is_the_cost_over_the_depth(cost_ms, depth, seed_k):
    got = predict({"quantity": "cpu_attention_k_from_layer_cost", "layer_cost_ms": cost_ms, "ctx": depth},
                  unit="us/pos/layer")
    assert got == pytest.approx(cost_ms * 1000.0 / depth)  # ms -> us, spread over the positions
    assert abs(got - seed_k) < 0.006  # U-25's '1% apart' costs land on the seed's two prints


def test_k_from_a_per_layer_cost_needs_both_inputs():
    with pytest.raises(DataError) as err:
        predict({"quantity": "cpu_attention_k_from_layer_cost", "ctx": 16384}, unit="us/pos/layer")
    assert err.value.field == "case.layer_cost_ms"


# --------------------------------------------------------------------------- L-16: ggml's block layouts


def test_q2_k_has_four_times_q4_k_scale_density_per_byte():
    # Q2_K: 256 weights, 16 sub-blocks, 256/4 = 64 quant bytes; Q4_K: 8 sub-blocks, 256/2 = 128.
    q2, q4 = 16 / 64, 8 / 128
    got = predict({"quantity": "scale_density_ratio", "weight_type": "Q2_K", "vs": {"weight_type": "Q4_K"}})
    assert got == pytest.approx(q2 / q4) == 4.0
    back = predict({"quantity": "scale_density_ratio", "weight_type": "Q4_K", "vs": {"weight_type": "Q2_K"}})
    assert back == pytest.approx(0.25)


@pytest.mark.parametrize("case, field", [
    ({"weight_type": "Q6_K", "vs": {"weight_type": "Q4_K"}}, "case.weight_type"),  # a scale, no min
    ({"weight_type": "Q2_K", "vs": {"kv_type": "q8_0"}}, "case.vs.weight_type"),
])
def test_a_format_without_a_scale_min_layout_names_its_field(case, field):
    with pytest.raises(DataError) as err:
        predict({"quantity": "scale_density_ratio", **case})
    assert err.value.field == field


def _pinned_common_h() -> str:
    """ggml-common.h of the pinned llama.cpp, read from the sdist the build uses (fetched into the
    cache's downloads once, whether or not anything has been built from it yet)."""
    import tarfile

    from lawbench.core.engines.build import _fetch_sdist
    from lawbench.core.paths import cache_root
    from lawbench.core.engines.record import DEFAULT_LLAMA_VERSION

    sdist = _fetch_sdist(DEFAULT_LLAMA_VERSION, cache_root() / "llama.cpp" / "downloads")
    with tarfile.open(sdist) as tar:
        for member in tar:
            if member.name.endswith("/llama.cpp/ggml/src/ggml-common.h"):
                return tar.extractfile(member).read().decode()
    raise AssertionError(f"{sdist} has no llama.cpp/ggml/src/ggml-common.h")


@pytest.mark.integration
def test_the_layouts_are_the_pinned_sources_structs():
    from lawbench.plugins.law4.blocks import BLOCKS, QK_K

    text = _pinned_common_h()
    assert re.search(r"#define QK_K (\d+)", text).group(1) == str(QK_K)
    scale_size = int(re.search(r"#define K_SCALE_SIZE (\d+)", text).group(1))

    def size(expr: str) -> int:  # "QK_K/16", "K_SCALE_SIZE": the forms these structs use
        name, _, div = expr.partition("/")
        return {"QK_K": QK_K, "K_SCALE_SIZE": scale_size}[name.strip()] // int(div or 1)

    for name, block in BLOCKS.items():
        end = text.index("} block_" + name[:-1].lower() + "K;")
        body = text[text.rindex("typedef struct {", 0, end):end]
        sizes = {m.group(1): size(m.group(2)) for m in re.finditer(r"uint8_t (\w+)\[([^\]]+)\]", body)}
        quant = sum(v for k, v in sizes.items() if k in ("qs", "qh"))
        assert quant == block.quant_bytes, name
        # Q2_K keeps one packed scale+min byte per sub-block; Q4_K/Q5_K pack 8 pairs at 6 bits in 12
        assert (sizes["scales"] if name == "Q2_K" else sizes["scales"] * 8 // 12) == block.sub_blocks, name


# --------------------------------------------------------------------------- bench.prime (D-29)


def test_prime_reads_the_whole_file_before_each_engine_visit(tmp_path, monkeypatch):
    model = tmp_path / "m.gguf"
    model.write_bytes(os.urandom(3 * 1024 + 17))
    events: list[str] = []
    real = measure.prime_read

    def spy_prime(path, chunk=measure.PRIME_CHUNK):
        events.append("prime")
        return real(path, chunk=1024)  # several chunks: the loop must read to the end

    def fake_engine(llama, model, params, bench):
        def visit(reps):
            events.append("engine")
            return Visit(values=[10.0] * reps, raw={"test": "tg8"})
        return visit

    monkeypatch.setattr(measure, "prime_read", spy_prime)
    monkeypatch.setattr(measure, "_bench_visit", fake_engine)
    primed = measure._visit(None, model, {}, BenchCase(n_gen=8, prime="read"))
    plain = measure._visit(None, model, {}, BenchCase(n_gen=8))
    sampler = ArmSampler({"a": primed, "b": plain}, labels={"a": "primed", "b": "plain"}, reps_per_visit=1,
                         warmup=False)
    samples = sampler.draw(2)  # rounds A B, then B A
    assert events == ["prime", "engine", "engine", "engine", "prime", "engine"]
    for s in samples:
        assert s.raw["raw_a"]["prime"]["bytes"] == model.stat().st_size
        assert s.raw["raw_a"]["prime"]["mode"] == "read"
        assert "prime" not in s.raw["raw_b"]


def test_prime_leaves_the_engine_flags_alone_and_names_the_arm():
    primed = Law4Case.model_validate({"quantity": "decode_tok_s", "model": "gguf:syn-25m-q4_0",
                                      "bench": {"n_gen": 8, "prime": "read"}})
    plain = primed.model_copy(update={"bench": BenchCase(n_gen=8)})
    cpu = PROFILES["cpu"]
    assert measure.bench_params(primed, cpu) == measure.bench_params(plain, cpu)
    params = measure.bench_params(plain, cpu)
    assert measure._label(primed, params) != measure._label(plain, params)


def test_prime_is_refused_for_a_server_session():
    with pytest.raises(ValueError, match="prime"):
        BenchCase(n_gen=8, tool="server", prime="read",
                  server={"prompt": "novel"})


# --------------------------------------------------------------------------- the new desktop anchors


NEW_GTX = ["law4.gtx1060.ratio.35b-ngl12.d29-primed-over-unprimed"]


def test_the_priming_anchor_primes_arm_a_only():
    loaded = load_anchors([ir.files("lawbench.anchors.law4") / "gtx1060.toml"], laws=["law4"],
                          profiles=PROFILES).by_id()
    anchor = loaded[NEW_GTX[0]].anchor
    cases = measure.arm_cases(anchor)
    assert cases["a"].bench.prime == "read" and cases["b"].bench.prime is None
    assert cases["a"].model == cases["b"].model == "gguf:qwen3.6-35b-a3b-depthaware"
