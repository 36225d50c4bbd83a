"""Bad models for `lawbench predict` (Law 4): exit 2 with one line naming the file and the key, the
tensor or the model reference — never a traceback, never a price for a shape no model can have.

Real parts throughout: GGUF files written by gguf's own GGUFWriter, manifests on disk, shipped
profiles (and one from a real plugin distribution), and the `lawbench` CLI in a subprocess.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import gguf
import numpy as np
import pytest
from conftest import write_plugin
from gguf import GGMLQuantizationType as Q

ROOT = Path(__file__).resolve().parents[1]
EMB, FF, VOCAB = 64, 128, 100


@pytest.fixture
def env(tmp_path) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_STEP_SUMMARY"))}
    e["LAWBENCH_CACHE"] = str(tmp_path / "cache")  # the header cache must not hide a re-written file
    return e


def predict(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lawbench.core.commands.main", "predict", *args], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=120, encoding="utf-8")


def assert_one_line(p: subprocess.CompletedProcess, code: int, *names: str) -> str:
    """Exit `code`, no traceback, one stderr line that holds every name."""
    out = p.stdout + p.stderr
    assert p.returncode == code, out
    assert "Traceback" not in out, out
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------- GGUF files


def good_meta(w: gguf.GGUFWriter) -> None:
    w.add_uint32("llama.block_count", 2)
    w.add_uint32("llama.embedding_length", EMB)
    w.add_uint32("llama.feed_forward_length", FF)
    w.add_uint32("llama.attention.head_count", 4)
    w.add_uint32("llama.attention.head_count_kv", 4)


def write_gguf(path: Path, meta: Callable[[gguf.GGUFWriter], None] = good_meta,
               tensors: Callable[[gguf.GGUFWriter], None] | None = None) -> Path:
    """A llama GGUF: the metadata `meta` writes, then a small dense model's tensors (or `tensors`,
    written as tensor infos only: a header-only file, which predict prices like a whole one)."""
    w = gguf.GGUFWriter(str(path), "llama")
    meta(w)
    if tensors is None:
        w.add_tensor("token_embd.weight", np.zeros((VOCAB, EMB), np.float32))
        for i in range(2):
            for n in ("attn_q", "attn_k", "attn_v", "attn_output"):
                w.add_tensor(f"blk.{i}.{n}.weight", np.zeros((EMB, EMB), np.float32))
            w.add_tensor(f"blk.{i}.ffn_up.weight", np.zeros((FF, EMB), np.float32))
            w.add_tensor(f"blk.{i}.ffn_down.weight", np.zeros((EMB, FF), np.float32))
            w.add_tensor(f"blk.{i}.attn_norm.weight", np.zeros((EMB,), np.float32))
        w.add_tensor("output.weight", np.zeros((VOCAB, EMB), np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
    else:
        tensors(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
    w.close()
    return path


def with_meta(**changes: tuple[str, Any]) -> Callable[[gguf.GGUFWriter], None]:
    """good_meta with some keys written as (writer method, value) instead."""
    def meta(w: gguf.GGUFWriter) -> None:
        good_meta(w)
        for key, (method, value) in changes.items():
            full = f"llama.{key.replace('__', '.')}"
            w.kv_data[0].pop(full, None)
            getattr(w, method)(full, value)
    return meta


def test_a_good_gguf_prices(tmp_path, env):
    """The control: the same writer, sane values, priced with exit 0."""
    path = write_gguf(tmp_path / "good.gguf")
    p = predict([str(path), "--profile", "cpu-ddr4", "--ctx", "1000", "--json"], env, tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stdout + p.stderr


@pytest.mark.parametrize("method, value, words", [
    ("add_string", "two", "the string 'two'"),     # was a ValueError traceback
    ("add_uint64", 2 ** 63, str(2 ** 63)),          # was an OverflowError traceback
    ("add_int32", -5, "not -5"),                   # was priced, exit 0
    ("add_float32", 2.5, "the float 2.5"),         # was priced as 2 layers, exit 0
    ("add_uint32", 0, "not 0"),
])
def test_block_count_of_the_wrong_type_or_range(tmp_path, env, method, value, words):
    path = write_gguf(tmp_path / "m.gguf", with_meta(block_count=(method, value)))
    p = predict([str(path), "--profile", "cpu-ddr4", "--ctx", "1000"], env, tmp_path)
    assert_one_line(p, 2, str(path), "llama.block_count", "from 1 to 100,000", words)


@pytest.mark.parametrize("value, words", [
    (["a", "b"], "entry 0"),                       # was a ValueError traceback at --ctx 1000
    ([4, 4, 4, 4, 4], "has 5 entries, but block_count is 2"),  # was priced, exit 0
    ([4], "has 1 entries"),
])
def test_per_layer_array_of_the_wrong_type_or_length(tmp_path, env, value, words):
    path = write_gguf(tmp_path / "m.gguf", with_meta(attention__head_count_kv=("add_array", value)))
    p = predict([str(path), "--profile", "cpu-ddr4", "--ctx", "1000"], env, tmp_path)
    assert_one_line(p, 2, str(path), "llama.attention.head_count_kv", words)


def _tensor_infos(bad: Callable[[gguf.GGUFWriter], None]) -> Callable[[gguf.GGUFWriter], None]:
    """A model's tensor table with one bad tensor among good ones (numpy order: ne0 last)."""
    def tensors(w: gguf.GGUFWriter) -> None:
        w.add_tensor_info("token_embd.weight", (VOCAB, EMB), np.float32, VOCAB * EMB * 4)
        bad(w)
        w.add_tensor_info("output.weight", (VOCAB, EMB), np.float32, VOCAB * EMB * 4)
    return tensors


@pytest.mark.parametrize("bad, words", [
    # 2^64-1 x 2^64-1: was priced at 1.36e30 GB with only a warning, exit 0
    (lambda w: w.add_tensor_info("blk.0.attn_q.weight", (2 ** 64 - 1, 2 ** 64 - 1), np.float32, 0),
     "more than 2^48"),
    (lambda w: w.add_tensor_info("blk.0.attn_q.weight", (0, EMB), np.float32, 0), "ne1 is 0"),
    # Q4_0 stores rows in blocks of 32: a row of 33 cannot exist (was priced, exit 0)
    (lambda w: w.add_tensor_info("blk.0.attn_q.weight", (EMB, 33), np.float32, 1000, raw_dtype=Q.Q4_0),
     "multiples of 32"),
    (lambda w: w.add_tensor_info("blk.0.attn_q.weight", (EMB, 128), np.float32, 1000, raw_dtype=Q.Q4_K),
     "multiples of 256"),
])
def test_tensor_dimensions_no_model_can_have(tmp_path, env, bad, words):
    path = write_gguf(tmp_path / "m.gguf", tensors=_tensor_infos(bad))
    p = predict([str(path), "--profile", "cpu-ddr4"], env, tmp_path)
    assert_one_line(p, 2, str(path), "tensor 'blk.0.attn_q.weight'", words)


# --------------------------------------------------------------------------- manifests


def manifest(tmp_path: Path, block_count: str = "2", q_shape: str = "[64, 64]") -> Path:
    path = tmp_path / "m.toml"
    path.write_text(f'''id = "m"
name = "M"
architecture = "llama"
source = "test"
weight_type = "Q4_0"
[metadata]
block_count = {block_count}
embedding_length = 64
attention.head_count = 4
attention.head_count_kv = 4
[[tensor]]
name = "token_embd.weight"
shape = [64, 100]
[[tensor]]
name = "blk.{{i}}.attn_q.weight"
shape = {q_shape}
[[tensor]]
name = "output.weight"
shape = [64, 100]
''', encoding="utf-8")
    return path


@pytest.mark.parametrize("kwargs, field, words", [
    ({"block_count": "100000000000"}, "metadata.block_count", "from 1 to 100,000"),  # was a MemoryError
    ({"block_count": "-3"}, "metadata.block_count", "not -3"),                      # was priced, exit 0
    ({"block_count": '"two"'}, "metadata.block_count", "the string 'two'"),
    ({"q_shape": "[60, 64]"}, "tensor.1.type", "multiples of 32"),                   # was priced, exit 0
    ({"q_shape": "[9223372036854775807, 9223372036854775807]"}, "tensor.1.shape", "more than 2^48"),
])
def test_bad_manifest_names_file_and_field(tmp_path, env, kwargs, field, words):
    path = manifest(tmp_path, **kwargs)
    p = predict([f"manifest:{path}", "--profile", "cpu-ddr4"], env, tmp_path)
    assert_one_line(p, 2, str(path), f"field {field}", words)


def test_a_good_manifest_prices(tmp_path, env):
    p = predict([f"manifest:{manifest(tmp_path)}", "--profile", "cpu-ddr4", "--json"], env, tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stdout + p.stderr


# --------------------------------------------------------------------------- model references


def test_unknown_manifest_names_the_reference_not_a_placeholder(tmp_path, env):
    line = assert_one_line(predict(["manifest:nope", "--profile", "cpu-ddr4"], env, tmp_path), 2,
                           "manifest:nope: no manifest 'nope'; shipped:", "qwen2.5-7b")
    assert "<" not in line  # core's "<anchor file>" placeholder means nothing on the command line


def test_an_existing_file_wins_over_a_kind_prefix(tmp_path, env):
    write_gguf(tmp_path / "qwen:7b.gguf")
    p = predict(["qwen:7b.gguf", "--profile", "cpu-ddr4", "--json"], env, tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stdout + p.stderr
    missing = predict(["qwen:8b.gguf", "--profile", "cpu-ddr4"], env, tmp_path)
    assert_one_line(missing, 2, "qwen:8b.gguf", "no such file", "'qwen' is not a model kind")


def test_unknown_catalogue_id_is_exit_2(tmp_path, env):
    p = predict(["gguf:nope", "--profile", "cpu-ddr4"], env, tmp_path)
    assert_one_line(p, 2, "gguf:nope", "unknown model id 'nope'", "smollm2-135m-q4_1")


# --------------------------------------------------------------------------- profiles that cannot price


@pytest.mark.parametrize("model", ["gguf", "manifest:qwen2.5-7b"])
def test_profile_without_bandwidth_says_so(tmp_path, env, model):
    """The generic `cpu` profile has a RAM tier but no bandwidth or η: a valid request it cannot
    answer. Was exit 1 with "puts bytes on the CPU [or GPU] but the profile has no RAM tier"."""
    ref = str(write_gguf(tmp_path / "good.gguf")) if model == "gguf" else model
    line = assert_one_line(predict([ref, "--profile", "cpu"], env, tmp_path), 2,
                           "profile 'cpu'", "tier 'ram' states no bandwidth", "lawbench profiles measure")
    assert "GPU" not in line and "no RAM tier" not in line


PROFILE_WITHOUT_ETA = """\
id = "no-eta-box"
description = "a RAM tier with a measured bandwidth and no eta (lawbench's tests)"
[fingerprint]
cpu_model_contains = "no such CPU"
[[tiers]]
name = "ram"
kind = "ram"
bandwidth_measured_gbs = { value = 20.0, source = "test" }
"""

PLUGIN = """\
from importlib.resources import files

import lawbench


@lawbench.hookimpl
def lawbench_profile_dirs():
    yield files("lawbench_noeta") / "profiles"
"""


def test_profile_without_eta_says_so(tmp_path, env):
    """What `lawbench profiles measure` writes from the cpu base: a bandwidth, still no η."""
    site = write_plugin(tmp_path / "site", "lawbench-noeta", {"noeta": "lawbench_noeta"}, {
        "lawbench_noeta/__init__.py": PLUGIN,
        "lawbench_noeta/profiles/no-eta-box.toml": PROFILE_WITHOUT_ETA})
    path = write_gguf(tmp_path / "good.gguf")
    p = predict([str(path), "--profile", "no-eta-box"], dict(env, PYTHONPATH=str(site)), tmp_path)
    assert_one_line(p, 2, "profile 'no-eta-box'", "tier 'ram' has no η")
