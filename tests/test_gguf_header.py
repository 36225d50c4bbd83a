"""The header scanner against gguf's own GGUFReader, on real model files and files GGUFWriter wrote.

The real files come from the model store (fetched once into ~/.cache/lawbench). Timings live in
benchmarks/header_scan.py, not here.
"""
from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

import lawbench.core.store.gguf_header as gh
from lawbench.core.store.gguf_header import GGUFHeaderError, SkippedArray, read_header
from lawbench.core.errors import LawbenchError

TEN_MB = 10 * 1024 * 1024


# each test gets an empty header cache (in memory and on disk)
pytestmark = pytest.mark.usefixtures("private_lawbench_cache")


@pytest.fixture(scope="module")
def real_models():
    from lawbench.core.store import ModelStore

    store = ModelStore()  # the real cache: fetched once, then reused by every later run
    return {"smollm2": store.path("smollm2-135m-q4_1"), "gemma3": store.path("gemma3-270m-q4_k_m")}


def _flatten(v):
    return [x for item in v for x in _flatten(item)] if isinstance(v, list) else [v]


def assert_matches_reader(h: gh.GGUFHeader, path: Path) -> int:
    """Field for field against GGUFReader; returns how many arrays the scanner skipped."""
    r = gguf.GGUFReader(path)
    assert h.version == r.fields["GGUF.version"].contents()
    keys = [k for k in r.fields if not k.startswith("GGUF.")]
    assert list(h.metadata) == keys
    skipped = 0
    for k in keys:
        f, got = r.fields[k], h.metadata[k]
        if isinstance(got, SkippedArray):
            skipped += 1
            assert f.types[0] == V.ARRAY and got.item_type == f.types[1], k
            if got.item_type != V.ARRAY:
                assert got.length == len(f.data), k
            continue
        want = f.contents()
        if f.types[:2] == [V.ARRAY, V.ARRAY]:  # GGUFReader flattens nested arrays
            got = _flatten(got)
        assert got == want, k
        # bool == int in Python, so compare the types too
        assert [type(x) for x in _flatten(got)] == [type(x) for x in _flatten(want)], k
    assert h.data_offset == r.data_offset
    assert len(h.tensors) == len(r.tensors)
    for t, rt in zip(h.tensors, r.tensors):
        assert t.name == rt.name
        assert t.shape == tuple(int(d) for d in rt.shape)
        assert t.ggml_type == int(rt.tensor_type) and t.type_name == rt.tensor_type.name
        assert (t.n_elements, t.n_bytes) == (rt.n_elements, rt.n_bytes)
        assert h.data_offset + t.offset == rt.data_offset
    assert h.file_size == os.path.getsize(path)
    return skipped


# --------------------------------------------------------------------------- synthetic files

def _q8_0(rows: int, cols: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 255, (rows, cols // 32 * 34), dtype=np.uint8)


def write_synthetic(path: Path, *, vocab: int = 3000, alignment: int | None = None,
                    header_only: bool = False) -> Path:
    """Every scalar type, strings, short and long arrays, nested arrays, several tensor types."""
    w = gguf.GGUFWriter(path, arch="llama")
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_uint8("t.u8", 250)
    w.add_int8("t.i8", -7)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("llama.block_count", 2)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_float64("t.f64", 3.141592653589793)
    w.add_bool("t.yes", True)
    w.add_bool("t.no", False)
    w.add_string("t.text", "Grüße, 世界 🙂")
    w.add_string("t.empty", "")
    w.add_array("t.ints", [1, -2, 3])
    w.add_array("t.strs", ["a", "ß", ""])
    w.add_array("t.floats", [0.5, 0.25])
    w.add_array("t.bools", [True, False, True])
    w.add_array("t.nested", [[1, 2], [3, 4, 5]])
    w.add_key_value("t.u64s", [1, 2**64 - 1], V.ARRAY, sub_type=V.UINT64)
    w.add_key_value("llama.attention.head_count", [4] * 12, V.ARRAY, sub_type=V.UINT32)
    w.add_token_list([f"tok{i}-é" for i in range(vocab)])  # long arrays: skipped
    w.add_token_scores([float(-i) for i in range(vocab)])
    w.add_token_types([1] * vocab)
    w.add_token_merges([f"t{i} o{i}" for i in range(vocab - 10)])
    w.add_key_value("t.long_nested", [[i, i] for i in range(gh.MAX_KEPT_ARRAY + 1)], V.ARRAY)
    w.add_key_value("t.edge", list(range(gh.MAX_KEPT_ARRAY)), V.ARRAY, sub_type=V.INT32)  # kept
    tensors = [("token_embd.weight", _q8_0(64, 256), Q.Q8_0),
               ("blk.0.attn_q.weight", np.ones((256, 256), np.float16), None),
               ("blk.0.attn_norm.weight", np.ones(256, np.float32), None),
               ("blk.0.ffn_up.weight", np.zeros((3, 2, 256 // 256 * 144), np.uint8), Q.Q4_K),
               ("blk.0.pos", np.arange(5, dtype=np.int32), None)]
    if header_only:
        for name, arr, raw in tensors:
            w.add_tensor_info(name, arr.shape, arr.dtype, arr.nbytes, raw_dtype=raw)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
    else:
        for name, arr, raw in tensors:
            w.add_tensor(name, arr, raw_dtype=raw)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("alignment", [None, 64])
def test_synthetic_file_matches_gguf_reader(tmp_path, alignment):
    path = write_synthetic(tmp_path / "s.gguf", alignment=alignment)
    h = read_header(path)
    assert assert_matches_reader(h, path) == 5  # tokens, scores, token_type, merges, long_nested
    assert h.metadata["tokenizer.ggml.tokens"] == SkippedArray(V.STRING, 3000)
    assert h.metadata["t.long_nested"] == SkippedArray(V.ARRAY, gh.MAX_KEPT_ARRAY + 1)
    assert h.metadata["t.nested"] == [[1, 2], [3, 4, 5]]
    assert h.arch("attention.head_count") == [4] * 12
    assert h.data_offset % (alignment or gguf.GGUF_DEFAULT_ALIGNMENT) == 0
    assert h.complete and h.file_size >= h.data_offset + h.total_tensor_bytes
    assert {t.type_name for t in h.tensors} == {"Q8_0", "F16", "F32", "Q4_K", "I32"}


def test_header_only_file_equals_the_whole_file(tmp_path):
    whole = read_header(write_synthetic(tmp_path / "whole.gguf"))
    bare = read_header(write_synthetic(tmp_path / "bare.gguf", header_only=True))
    assert not bare.complete and whole.complete
    assert (bare.metadata, bare.tensors, bare.data_offset) == (whole.metadata, whole.tensors, whole.data_offset)
    with pytest.raises(Exception):  # the reason this scanner exists
        gguf.GGUFReader(tmp_path / "bare.gguf")


# --------------------------------------------------------------------------- real files

@pytest.mark.parametrize("name,arch,layers", [("smollm2", "llama", 30), ("gemma3", "gemma3", 18)])
def test_real_file_matches_gguf_reader_and_its_first_10_mb(real_models, tmp_path, name, arch, layers):
    path = real_models[name]
    h = read_header(path)
    assert (h.architecture, h.arch("block_count")) == (arch, layers)
    assert assert_matches_reader(h, path) >= 2
    assert h.complete and h.file_size == h.data_offset + max(t.offset + t.n_bytes for t in h.tensors)

    prefix = tmp_path / f"{name}-first-10mb.gguf"
    with open(path, "rb") as src, open(prefix, "wb") as dst:
        dst.write(src.read(TEN_MB))
    p = read_header(prefix)
    assert p.file_size == TEN_MB and not p.complete
    assert (p.version, p.architecture, p.metadata, p.tensors, p.data_offset) == \
        (h.version, h.architecture, h.metadata, h.tensors, h.data_offset)


def _assert_one_line_naming(exc: pytest.ExceptionInfo, path: Path, *words: str) -> None:
    msg = str(exc.value)
    assert isinstance(exc.value, LawbenchError)
    assert "\n" not in msg and str(path) in msg, msg
    for w in words:
        assert w in msg, msg


def test_truncation_inside_the_header_names_file_and_byte(real_models, tmp_path):
    whole = real_models["smollm2"]
    h = read_header(whole)
    for cut in (0, 3, 20, 1_000_000, h.data_offset - 40):  # magic, counts, vocab, tensor table
        part = tmp_path / f"cut{cut}.gguf"
        with open(whole, "rb") as src:
            part.write_bytes(src.read(cut))
        with pytest.raises(GGUFHeaderError) as exc:
            read_header(part)
        _assert_one_line_naming(exc, part, "truncated inside the GGUF header at byte", "need more of the file")
        at = int(str(exc.value).split("at byte ")[1].split()[0])
        assert at <= cut


def _patched(tmp_path: Path, offset: int, fmt: str, value: int) -> Path:
    src = write_synthetic(tmp_path / "ok.gguf", vocab=2000)
    data = bytearray(src.read_bytes())
    struct.pack_into(fmt, data, offset, value)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(bytes(data))
    return bad


def test_bad_magic_version_endianness_and_value_type(tmp_path):
    data = write_synthetic(tmp_path / "ok.gguf", vocab=2000).read_bytes()
    (tmp_path / "magic.gguf").write_bytes(b"GGML" + data[4:])
    with pytest.raises(GGUFHeaderError) as exc:
        read_header(tmp_path / "magic.gguf")
    _assert_one_line_naming(exc, tmp_path / "magic.gguf", "not a GGUF file")

    bad = _patched(tmp_path, 4, "<I", 99)
    with pytest.raises(GGUFHeaderError) as exc:
        read_header(bad)
    _assert_one_line_naming(exc, bad, "unsupported GGUF version 99")

    bad = _patched(tmp_path, 4, ">I", 3)
    with pytest.raises(GGUFHeaderError) as exc:
        read_header(bad)
    _assert_one_line_naming(exc, bad, "big-endian")

    key_len = struct.unpack_from("<Q", data, 24)[0]  # magic, version, two counts, then the first key
    bad = _patched(tmp_path, 32 + key_len, "<I", 99)
    with pytest.raises(GGUFHeaderError) as exc:
        read_header(bad)
    _assert_one_line_naming(exc, bad, "unknown value type 99", "general.architecture")


def test_unknown_tensor_type_and_missing_file(tmp_path):
    data = write_synthetic(tmp_path / "ok.gguf", vocab=2000).read_bytes()
    name = b"blk.0.attn_norm.weight"
    at = data.index(name) + len(name) + 4 + 8  # n_dims (u32) = 1, one u64 dimension, then the type
    bad = _patched(tmp_path, at, "<I", 250)
    with pytest.raises(GGUFHeaderError) as exc:
        read_header(bad)
    _assert_one_line_naming(exc, bad, "blk.0.attn_norm.weight", "ggml type 250")

    with pytest.raises(GGUFHeaderError) as exc:
        read_header(tmp_path / "absent.gguf")
    _assert_one_line_naming(exc, tmp_path / "absent.gguf", "cannot open")


def test_arch_lookup():
    h = gh.GGUFHeader(path="x.gguf", version=3, architecture="llama", metadata={"llama.block_count": 2},
                      tensors=(), data_offset=32, file_size=32)
    assert h.arch("block_count") == 2 and h.arch("expert_count", 0) == 0
    with pytest.raises(GGUFHeaderError, match="x.gguf.*'llama.expert_count'"):
        h.arch("expert_count")


# --------------------------------------------------------------------------- cache

def _refuse_scan(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("scanned the file although the cache should have answered")
    monkeypatch.setattr(gh, "_scan_file", refuse)


def test_disk_cache_answers_without_scanning(tmp_path, monkeypatch):
    path = write_synthetic(tmp_path / "s.gguf")
    first = read_header(path)
    assert list(gh.cache_dir().glob("*.json"))
    gh.clear_memory_cache()
    _refuse_scan(monkeypatch)
    again = read_header(path)
    assert again == first  # SkippedArray, tuples and value types survive the JSON round trip
    link = tmp_path / "alias.gguf"
    link.symlink_to(path)
    assert read_header(link).path == str(link) and read_header(link).tensors == first.tensors


def test_cache_invalidates_when_the_file_changes(tmp_path, monkeypatch):
    path = write_synthetic(tmp_path / "s.gguf")
    assert read_header(path).arch("block_count") == 2
    # same size, new content: rewrite block_count in place and move mtime on, as a later write would
    data = bytearray(path.read_bytes())
    at = data.index(b"llama.block_count") + len(b"llama.block_count") + 4
    struct.pack_into("<I", data, at, 7)
    st = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert read_header(path).arch("block_count") == 7
    # a different file under the same name
    shutil.copy(write_synthetic(tmp_path / "other.gguf", vocab=100), path)
    assert read_header(path).metadata["tokenizer.ggml.tokens"] == [f"tok{i}-é" for i in range(100)]


def test_unreadable_cache_entry_is_rescanned_and_use_cache_false_bypasses(tmp_path, monkeypatch):
    path = write_synthetic(tmp_path / "s.gguf")
    first = read_header(path)
    for entry in gh.cache_dir().glob("*.json"):
        entry.write_text("{not json", encoding="utf-8")
    gh.clear_memory_cache()
    assert read_header(path) == first
    _refuse_scan(monkeypatch)
    with pytest.raises(AssertionError):
        read_header(path, use_cache=False)
