"""Law 1: effective rank, the gauges, RTN, the sign flip on a constructed pair, case errors, the
fake-quantized GGUF round trip, and (integration) the tensor-level measurement on a real model."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _engine_fixtures import llama, smollm2  # noqa: F401
from conftest import carrier_plugin, run_cli

from lawbench.plugins.law1.gauges import (effective_rank, hadamard_matrix, quantize_in_gauge, rel_mse,
                                          rel_output_error, rtn, truncate_rank)
from lawbench.plugins.law1.predict import forecast, gaussian_distortion

DATA = Path(__file__).parent / "data" / "law1"


def _orthonormal(n: int, k: int, rng) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((n, k)))
    return q


@pytest.mark.parametrize("rank", [1, 7, 32])
def test_effective_rank_of_equal_singular_values_is_the_rank(rank):
    rng = np.random.default_rng(rank)
    w = _orthonormal(96, rank, rng) @ _orthonormal(64, rank, rng).T * 3.0
    assert effective_rank(w) == pytest.approx(rank, rel=1e-6)


def test_effective_rank_truncation_and_bounds():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((128, 64))
    assert 1.0 < effective_rank(w) <= 64
    assert effective_rank(truncate_rank(w, 5)) <= 5 + 1e-6
    u, s, vt = np.linalg.svd(w, full_matrices=False)
    assert np.allclose(truncate_rank(w, 5), (u[:, :5] * s[:5]) @ vt[:5], atol=1e-5)


@pytest.mark.parametrize("n", [64, 576, 640])
def test_randomized_hadamard_is_orthogonal(n):
    r = hadamard_matrix(n, seed=3)
    assert np.allclose(r @ r.T, np.eye(n), atol=1e-10)
    assert not np.allclose(r, hadamard_matrix(n, seed=4))


def test_rtn_error_levels_and_exactness():
    x = np.tile(np.arange(16, dtype=np.float32), (2, 4))  # 16 equally spaced values per group
    assert np.array_equal(rtn(x, 4, 16), x)  # 16 levels reproduce them exactly
    rng = np.random.default_rng(0)
    g = rng.standard_normal((512, 64)).astype(np.float32)
    errs = [rel_mse(g, rtn(g, b, 64)) for b in (2, 3, 4)]
    assert errs[0] > errs[1] > errs[2] > 0
    assert errs[2] == pytest.approx(gaussian_distortion(4, 64), rel=0.05)
    with pytest.raises(ValueError):
        rtn(g, 2, 48)


def test_rotation_erases_structure_and_the_sign_flips():
    """Full-rank heavy-tailed rows (outlier channels): the rotation helps. A rank-1 bottleneck
    whose rows are copies of one two-valued vector: native groups hold 2 values and lose nothing
    at 2 bits; rotated they are Gaussian-like: the rotation hurts. Output error included."""
    rng = np.random.default_rng(7)
    full = rng.standard_normal((256, 256)) * np.where(rng.random(256) < 0.03, 12.0, 1.0)
    low = np.outer(rng.standard_normal(256), rng.choice([-1.0, 1.0], 256))
    cov = np.ones(256)
    for w, helps in ((full, True), (low, False)):
        w = w.astype(np.float32)
        nat = quantize_in_gauge(w, 2, 64, "native")
        had = quantize_in_gauge(w, 2, 64, "hadamard", seed=1)
        ratio = rel_output_error(w, had, cov) / max(rel_output_error(w, nat, cov), 1e-30)
        assert (ratio < 1) == helps
    assert forecast(effective_rank(full), 256, 2, 64).helps
    assert not forecast(effective_rank(low), 256, 2, 64).helps


def test_every_gauge_returns_the_native_basis():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((32, 128)).astype(np.float32)
    for gauge in ("native", "hadamard", "svd", "diagonal"):
        q = quantize_in_gauge(w, 8, 64, gauge, seed=0)
        assert q.shape == w.shape and rel_mse(w, q) < 1e-3


@pytest.mark.parametrize("old, new, field", [
    ("bits = 12", "bits = 12", "case.bits"),
    ("bits = 12", "bits = 2, group = 48", "case.group"),
    ("bits = 12", "bits = 2, gauge = \"fourier\"", "case.gauge"),
    ("layers = [0, 1, 2], bits = 12", "layers = [0, 1], bits = 2", "case.layers"),
    ("role = \"ffn_up\", layers = [0, 1, 2], bits = 12", "role = \"ffn_down\", layers = [0, 1, 2], bits = 2, activations = \"norm-gain\"", "case"),
    ("bits = 12", "bits = 2, activations = \"engine\"", "case.activations"),
])
def test_bad_case_is_one_line_naming_file_anchor_field(tmp_path, cli_env, old, new, field):
    text = (DATA / "bad-case.toml").read_text(encoding="utf-8").replace(old, new)
    package = carrier_plugin(tmp_path / "site", "extra", {"extra.toml": text}, dist="lawbench-extra-anchors")
    proc = run_cli(["check"], dict(cli_env, PYTHONPATH=str(package.parent)), tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "law1.test.bad-bits" in ln]
    assert len(lines) == 1, proc.stderr
    assert "extra.toml" in lines[0] and f"field {field}" in lines[0], lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.integration
def test_fake_quantized_gguf_round_trip(tmp_path, smollm2):  # noqa: F811
    from lawbench.plugins.law1.fakequant import write_fake_quantized
    from lawbench.plugins.law1.tensors import TensorFile

    src = TensorFile(smollm2)
    names = ["blk.0.attn_k.weight", "blk.1.attn_v.weight"]
    out = tmp_path / "fq.gguf"
    written = write_fake_quantized(smollm2, out, {n: lambda w: quantize_in_gauge(w, 2, 64, "hadamard", seed=1)
                                                  for n in names}, lambda n: src.read(n).weights)
    copy = TensorFile(out)
    for n in names:
        assert copy.read(n).source_type == "F32"
        assert np.array_equal(copy.read(n).weights, written[n])
    assert np.array_equal(copy.read("blk.3.ffn_up.weight").weights, src.read("blk.3.ffn_up.weight").weights)
    assert copy.header.metadata.keys() == src.header.metadata.keys()


@pytest.mark.integration
def test_real_tensor_measurement_smollm2(smollm2):  # noqa: F811
    from lawbench.plugins.law1.case import Law1Case
    from lawbench.plugins.law1.measure import tensor_effect

    case = Law1Case(model="gguf:smollm2-135m-q4_1", role="attn_k", layers=[0, 1, 2], bits=2,
                    activations="norm-gain")
    got = tensor_effect(str(smollm2), case, 15, seed=0)
    assert got["activations"] == "norm-gain" and got["inputs"].startswith("norm-gain")
    assert got["source_type"] == "Q4_1" and 1 < got["erank"] <= 192
    # the rotated side is the Gaussian distortion, whatever the tensor (predict.py)
    assert got["rel_mse_gauge"] == pytest.approx(gaussian_distortion(2, 64), rel=0.05)
    assert 0.5 < got["ratio"] < 1.5


# --------------------------------------------------------------------------- model level (perplexity)

def _ppl_anchor(**case):
    from lawbench.core.models import Anchor

    return Anchor.model_validate({
        "id": "test.law1.ppl", "law": "law1", "claim": "c", "quantity": "gauge/native perplexity ratio",
        "unit": "x", "kind": "measurement", "profiles": ["cpu"], "band": {"hi": 1.0},
        "case": {"model": "gguf:smollm2-135m-q4_1", "role": "ffn_up", "bits": 2, **case},
        "budget": {"min_samples": 3, "max_samples": 3, "batch": 3},
        "provenance": {"seed": "test", "notes": "test"}})


@pytest.mark.parametrize("case, field", [
    ({"layers": [0, 0, 1]}, "case.layers"),
    ({"group": 48}, "case.group"),
    ({"gauge": "native"}, "case.gauge"),
    ({"model": "no-such-model"}, "case.model"),
    ({"slices": 4}, "case.slices"),
])
def test_perplexity_case_errors_name_the_field(case, field):
    from lawbench.core.errors import DataError
    from lawbench.plugins.law1.law import Law1

    with pytest.raises(DataError) as exc:
        Law1().check_anchor(_ppl_anchor(**case))
    assert "test.law1.ppl" in str(exc.value) and field in str(exc.value)
    assert "\n" not in str(exc.value)
    Law1().check_anchor(_ppl_anchor())  # the default case is valid: layers "all", hadamard


def test_fake_quantized_file_key_follows_its_inputs():
    from lawbench.plugins.law1.model_level import Law1PerplexityCase, file_key

    case = Law1PerplexityCase(model="gguf:m", role="ffn_up", bits=2)
    names = ["blk.0.ffn_up.weight", "blk.1.ffn_up.weight"]
    key = file_key("a" * 64, names, case, "hadamard")
    assert key == file_key("a" * 64, names, case, "hadamard")
    assert key != file_key("b" * 64, names, case, "hadamard")  # another source
    assert key != file_key("a" * 64, names[:1], case, "hadamard")  # other tensors
    assert key != file_key("a" * 64, names, case.model_copy(update={"bits": 3}), "hadamard")
    assert key != file_key("a" * 64, names, case.model_copy(update={"seed": 1}), "hadamard")
    # the native copy has no rotation: its seed does not name another file
    assert file_key("a" * 64, names, case, "native") == file_key("a" * 64, names, case.model_copy(update={"seed": 1}), "native")


@pytest.mark.integration
def test_real_model_level_run_pairs_slices_and_reuses_its_files(llama, smollm2, tmp_path, monkeypatch):  # noqa: F811
    """Three layers' ffn_up fake-quantized both ways, scored by the real llama-perplexity on the
    same slices; the second sampler finds both copies in the model cache."""
    import math

    from lawbench.plugins.law1.law import Law1

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path))
    anchor = _ppl_anchor(layers=[0, 1, 2], chunks=1, slice_chars=1500)

    class Res:
        def llama(self):
            return llama

        def model(self, model_id):
            return smollm2

    class Profile:
        def engine_threads(self):
            return 1

    sampler = Law1().sampler(anchor, Profile(), Res())
    info = sampler.protocol()
    assert not info["files"]["native"]["cached"] and info["files"]["native"]["key"] != info["files"]["gauge"]["key"]
    assert set(info["tensors"]) == {f"blk.{n}.ffn_up.weight" for n in (0, 1, 2)}
    samples = sampler.draw(2)
    assert [s.raw["slice"] for s in samples] == [0, 1]
    assert [s.raw["order"] for s in samples] == [["gauge", "native"], ["native", "gauge"]]
    for s in samples:  # the sample is the paired ratio on one slice
        assert s.value == pytest.approx(math.exp(s.raw["visits"]["gauge"]["nll"] - s.raw["visits"]["native"]["nll"]))
        assert s.value == pytest.approx(s.raw["ppl_gauge"] / s.raw["ppl_native"], rel=1e-3)
    folder = tmp_path / "models" / "smollm2-135m-q4_1" / "law1-fakequant"
    built = {p.name: p.stat().st_mtime_ns for p in folder.glob("*.gguf")}
    assert len(built) == 2
    again = Law1().sampler(anchor, Profile(), Res()).protocol()
    assert again["files"]["gauge"]["cached"] and again["files"]["native"]["cached"]
    assert {p.name: p.stat().st_mtime_ns for p in folder.glob("*.gguf")} == built
