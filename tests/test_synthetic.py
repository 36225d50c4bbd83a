"""The synthetic GGUF factory: shapes, validation, caching, and real llama.cpp loading its files."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import gguf
import pytest

from _engine_fixtures import TINY, llama, synth_dir, tiny_f16  # noqa: F401  (fixtures)
from lawbench.core.engines.bench import quantize, run_bench
from lawbench.core.errors import DataError, LawbenchError
from lawbench.core.store.catalog import load_catalog
from lawbench.core.store.synthetic import SyntheticSpec, build_synthetic, file_type_of

LADDER = Path(__file__).parent.parent / "anchors" / "models_synthetic.toml"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_f16_file_has_the_spec_shapes(tiny_f16):
    r = gguf.GGUFReader(str(tiny_f16))
    names = {t.name: t for t in r.tensors}
    assert len(names) == 3 + 9 * TINY.n_layer
    assert list(names["token_embd.weight"].shape) == [TINY.n_embd, TINY.n_vocab]
    assert list(names["blk.1.attn_k.weight"].shape) == [TINY.n_embd, TINY.n_head_kv * TINY.head_dim]
    assert list(names["blk.0.ffn_down.weight"].shape) == [TINY.n_ff, TINY.n_embd]
    assert names["blk.0.attn_q.weight"].tensor_type == gguf.GGMLQuantizationType.F16
    assert names["output_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert sum(int(t.n_elements) for t in r.tensors) == TINY.n_params()
    tokens = r.get_field("tokenizer.ggml.tokens")
    assert len(tokens.data) == TINY.n_vocab
    assert file_type_of(tiny_f16) == int(gguf.LlamaFileType.MOSTLY_F16)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, tiny_f16):
    again = build_synthetic(TINY, cache_dir=tmp_path / "a")
    assert _sha(again) == _sha(tiny_f16)
    other = build_synthetic(TINY.model_copy(update={"seed": 1}), cache_dir=tmp_path / "a")
    assert other != again and _sha(other) != _sha(again)


def test_cached_file_is_reused_not_rewritten(tmp_path):
    first = build_synthetic(TINY, cache_dir=tmp_path)
    mtime = first.stat().st_mtime_ns
    renamed = build_synthetic(TINY.model_copy(update={"id": "tiny-again"}), cache_dir=tmp_path)
    assert renamed == first and first.stat().st_mtime_ns == mtime
    # no temp files left: the model and its stamp (lawbench.core.store.model_stamp)
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name, first.name + ".sha256.json"]


@pytest.mark.parametrize("field,value,needle", [
    ("n_ff", 500, "field n_ff = 500 is not a multiple of 256"),
    ("n_embd", 320, "field n_embd = 320 is not a multiple of 256"),
])
def test_kquant_rows_must_be_multiples_of_256(field, value, needle, tmp_path):
    data = {**TINY.model_dump(), "id": "bad-k", "weight_type": "Q4_K_M", field: value}
    if field == "n_embd":
        data["n_head"], data["n_head_kv"] = 5, 5
    with pytest.raises(DataError) as exc:
        _catalog_of(tmp_path / "models.toml", data)
    assert needle in str(exc.value) and "bad-k" in str(exc.value)
    assert str(exc.value).startswith(str(tmp_path / "models.toml"))


def _catalog_of(path: Path, spec: dict):
    """The model catalogue of one file holding one [[synthetic]] table: how a spec is read."""
    lines = ["[[synthetic]]"] + [f"{k} = {json.dumps(v)}" for k, v in spec.items() if v is not None]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_catalog([path])


def test_q4_0_needs_only_32():
    SyntheticSpec(**{**TINY.model_dump(), "n_ff": 544, "weight_type": "Q4_0"})


@pytest.mark.parametrize("patch,needle", [
    ({"weight_type": "IQ2_XXS"}, "weight_type"),
    ({"n_head_kv": 3}, "n_head_kv"),
    ({"colour": "red"}, "field synthetic[tiny].colour"),
    ({"architecture": "qwen2"}, "field synthetic[tiny].architecture"),
])
def test_bad_specs_name_the_field(patch, needle, tmp_path):
    with pytest.raises(DataError) as exc:
        _catalog_of(tmp_path / "m.toml", {**TINY.model_dump(), **patch})
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_quantized_type_without_quantizer_is_a_clear_error(tmp_path):
    with pytest.raises(LawbenchError, match="'tiny'.*needs llama-quantize"):
        build_synthetic(TINY.model_copy(update={"weight_type": "Q8_0"}), cache_dir=tmp_path)


def test_quantizer_writing_the_wrong_type_is_not_cached(tmp_path):
    def liar(src: Path, dst: Path, type_name: str) -> None:
        dst.write_bytes(src.read_bytes())  # claims Q8_0, writes F16

    spec = TINY.model_copy(update={"weight_type": "Q8_0"})
    with pytest.raises(LawbenchError, match="wrote file type 1, not Q8_0"):
        build_synthetic(spec, cache_dir=tmp_path, quantize=liar)
    assert [p.name for p in tmp_path.iterdir() if "Q8_0" in p.name] == []


def test_ladder_loads_and_fits_k_quants():
    specs = [s for s in load_catalog([LADDER]).synthetic if not s.n_expert]  # the dense speed ladder
    assert {s.weight_type for s in specs} >= {"F16", "Q8_0", "Q4_0", "Q4_K_M", "Q2_K"}
    sizes = sorted({s.n_params() for s in specs})
    assert len(sizes) == 3 and sizes[0] < 40e6 and 60e6 < sizes[1] < 150e6 and sizes[2] < 500e6
    assert all(s.n_embd % 256 == 0 and s.n_ff % 256 == 0 for s in specs)


def test_ladder_duplicate_id_is_refused(tmp_path):
    text = LADDER.read_text(encoding="utf-8")
    start = text.index("[[synthetic]]")
    first = text[start:text.index("[[synthetic]]", start + 1)]
    bad = tmp_path / "dup.toml"
    bad.write_text(first + "\n" + first, encoding="utf-8")
    with pytest.raises(DataError, match="duplicate model id"):
        load_catalog([bad])


@pytest.mark.integration
@pytest.mark.parametrize("weight_type", ["Q4_K_M", "Q2_K", "Q4_0"])
def test_real_quantize_and_real_llama_bench_load_it(llama, synth_dir, weight_type):
    spec = TINY.model_copy(update={"weight_type": weight_type})
    path = build_synthetic(spec, cache_dir=synth_dir,
                           quantize=lambda s, d, t: quantize(llama, s, d, t, timeout_s=300))
    want = getattr(gguf.LlamaFileType, f"MOSTLY_{weight_type}")
    assert file_type_of(path) == int(want)
    r = gguf.GGUFReader(str(path))
    kinds = {t.tensor_type.name for t in r.tensors}
    assert "F16" not in kinds  # nothing fell back to the source type
    run = run_bench(llama, path, n_prompt=0, n_gen=4, repetitions=1, threads=1, timeout_s=120)
    assert run.records[0]["model_type"].lower().find(weight_type.lower()[:2]) >= 0
    assert run.samples_ts[0][0] > 0


@pytest.mark.integration
def test_real_llama_bench_loads_the_f16_file(llama, tiny_f16):
    run = run_bench(llama, tiny_f16, n_prompt=8, n_gen=4, repetitions=2, threads=1, timeout_s=120)
    assert [r["n_prompt"] for r in run.records] == [8, 0]
    assert run.records[0]["model_n_params"] == TINY.n_params()
    assert all(len(ts) == 2 and min(ts) > 0 for ts in run.samples_ts)
