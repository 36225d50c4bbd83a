"""A fast GGUF header scanner: price a model from its header, before (or without) its tensor data.

`gguf.GGUFReader` maps the whole file, refuses one whose tensor data is missing, and decodes every
tokenizer string (seconds for a 152k vocabulary). predict() needs only the architecture metadata
and the tensor table, so this scanner walks the header with gguf's own constants and types, skips
long arrays by their length without decoding them (a `SkippedArray` placeholder records what was
there), and stops at the start of the tensor data. Little-endian files only (every GGUF that
llama.cpp writes on x86 and ARM); a big-endian file is refused with a clear error. Only regular
files are read (a named pipe, a device or a folder is refused at once, never waited on), and
arrays may nest at most MAX_ARRAY_DEPTH deep. Every fault is a GGUFHeaderError: a DataError that
names the file (exit 2 at the command line).

Results are cached by file identity (realpath, size, mtime_ns): in this process, and as JSON under
`$LAWBENCH_CACHE/headers/` (default `~/.cache/lawbench`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import mmap
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf.constants import (
    GGML_QUANT_SIZES,
    GGUF_DEFAULT_ALIGNMENT,
    GGUF_MAGIC,
    GGUF_VERSION,
    GGMLQuantizationType,
    GGUFValueType,
)

from lawbench.core.errors import DataError
from lawbench.core.paths import cache_root

SUPPORTED_VERSIONS = (2, GGUF_VERSION)
# Arrays longer than this are skipped (tokenizer tokens/scores/types/merges); per-layer arrays
# (head counts, sliding-window patterns) are far shorter and are kept.
MAX_KEPT_ARRAY = 1024
# Arrays of arrays: gguf-py writes them, tokenizers use one level; deeper is a corrupt or hostile
# file, and scanning it must not exhaust Python's recursion limit.
MAX_ARRAY_DEPTH = 8
GGML_MAX_DIMS = 4
# Bump when the cached JSON's shape or the scanner's output changes, so old entries are ignored.
CACHE_FORMAT = 1

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
# One-character struct codes per scalar GGUF type; arrays of them decode in one unpack call.
_SCALAR_CODE = {
    GGUFValueType.UINT8: "B", GGUFValueType.INT8: "b",
    GGUFValueType.UINT16: "H", GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I", GGUFValueType.INT32: "i",
    GGUFValueType.UINT64: "Q", GGUFValueType.INT64: "q",
    GGUFValueType.FLOAT32: "f", GGUFValueType.FLOAT64: "d",
    GGUFValueType.BOOL: "?",
}
_SCALAR_SIZE = {t: struct.calcsize("<" + c) for t, c in _SCALAR_CODE.items()}


class GGUFHeaderError(DataError):
    """A GGUF header cannot be read; the message names the file and what is wrong."""

    def __init__(self, file: str, message: str):
        super().__init__(file, message)


@dataclass(frozen=True)
class SkippedArray:
    """A long metadata array the scanner stepped over without decoding."""

    item_type: GGUFValueType
    length: int


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # GGUF order (ne0 first), as GGUFReader's tensor.shape
    ggml_type: int  # gguf.GGMLQuantizationType value
    type_name: str  # "Q4_K", "F16", …
    n_elements: int
    n_bytes: int  # from GGML_QUANT_SIZES (block size, type size)
    offset: int  # relative to the start of the tensor data


_MISSING = object()


@dataclass(frozen=True)
class GGUFHeader:
    """A GGUF file's metadata and tensor table (names, types, shapes, offsets): what read_header returns."""

    path: str
    version: int
    architecture: str  # general.architecture
    metadata: dict[str, Any]  # treat as read-only: cached headers are shared
    tensors: tuple[TensorInfo, ...]
    data_offset: int  # absolute offset of the tensor data, alignment applied
    file_size: int

    def arch(self, key: str, default: Any = _MISSING) -> Any:
        """metadata[f"{architecture}.{key}"], e.g. arch("block_count")."""
        full = f"{self.architecture}.{key}"
        if full in self.metadata:
            return self.metadata[full]
        if default is _MISSING:
            raise GGUFHeaderError(self.path, f"no metadata key {full!r} in this GGUF header")
        return default

    @property
    def complete(self) -> bool:
        """True when the file holds every tensor's data (not a header-only or partial download)."""
        end = max((t.offset + t.n_bytes for t in self.tensors), default=0)
        return self.file_size >= self.data_offset + end

    @property
    def total_tensor_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)


# --------------------------------------------------------------------------- scanning


class _Scanner:
    """Walks the header bytes; every read checks bounds so truncation is an error, not garbage."""

    def __init__(self, buf: Any, size: int, path: str):
        self.buf, self.size, self.path, self.pos = buf, size, path, 0

    def fail(self, message: str) -> GGUFHeaderError:
        return GGUFHeaderError(self.path, message)

    def truncated(self, at: int, what: str) -> GGUFHeaderError:
        return self.fail(f"truncated inside the GGUF header at byte {at} while reading {what} "
                         f"(the file has {self.size} bytes): need more of the file, "
                         f"or the header is corrupt")

    def need(self, n: int, what: str) -> int:
        start = self.pos
        if start + n > self.size:
            raise self.truncated(start, what)
        self.pos = start + n
        return start

    def u32(self, what: str) -> int:
        return _U32.unpack_from(self.buf, self.need(4, what))[0]

    def u64(self, what: str) -> int:
        return _U64.unpack_from(self.buf, self.need(8, what))[0]

    def string(self, what: str) -> str:
        n = self.u64(what)
        start = self.need(n, what)
        try:
            return bytes(self.buf[start:start + n]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{what} at byte {start} is not UTF-8 ({e.reason})") from None

    def value_type(self, key: str) -> GGUFValueType:
        at = self.pos
        raw = self.u32(f"the value type of {key!r}")
        try:
            return GGUFValueType(raw)
        except ValueError:
            raise self.fail(f"metadata key {key!r} has unknown value type {raw} at byte {at}") from None

    def value(self, vtype: GGUFValueType, key: str, depth: int = 0) -> Any:
        code = _SCALAR_CODE.get(vtype)
        if code is not None:
            return struct.unpack_from("<" + code, self.buf, self.need(_SCALAR_SIZE[vtype], key))[0]
        if vtype == GGUFValueType.STRING:
            return self.string(f"the value of {key!r}")
        item_type, length = self.array_head(key, depth)
        if length > MAX_KEPT_ARRAY:
            self.skip_items(item_type, length, key, depth)
            return SkippedArray(item_type, length)
        code = _SCALAR_CODE.get(item_type)
        if code is not None:
            start = self.need(_SCALAR_SIZE[item_type] * length, key)
            return list(struct.unpack_from(f"<{length}{code}", self.buf, start))
        return [self.value(item_type, key, depth + 1) for _ in range(length)]

    def array_head(self, key: str, depth: int) -> tuple[GGUFValueType, int]:
        """An array's item type and length, refused when nested too deep or longer than the
        bytes left could hold (so a corrupt length fails here, not after a long loop)."""
        at = self.pos
        if depth >= MAX_ARRAY_DEPTH:
            raise self.fail(f"metadata key {key!r} nests arrays more than {MAX_ARRAY_DEPTH} deep "
                            f"(at byte {at}): a corrupt header")
        item_type = self.value_type(key)
        length = self.u64(f"the length of {key!r}")
        smallest = _SCALAR_SIZE.get(item_type) or (8 if item_type == GGUFValueType.STRING else 12)
        if length * smallest > self.size - self.pos:
            raise self.truncated(self.pos, f"the {length} items of {key!r} (at least "
                                           f"{length * smallest} bytes)")
        return item_type, length

    def skip_items(self, item_type: GGUFValueType, length: int, key: str, depth: int = 0) -> None:
        size = _SCALAR_SIZE.get(item_type)
        if size is not None:
            self.need(size * length, key)
        elif item_type == GGUFValueType.STRING:
            # The hot loop of a 152k vocabulary: read each length, jump over the bytes.
            buf, end, pos, unpack = self.buf, self.size, self.pos, _U64.unpack_from
            last = pos
            for _ in range(length):
                if pos + 8 > end:
                    raise self.truncated(pos, f"a string of {key!r}")
                last = pos
                pos += 8 + unpack(buf, pos)[0]
            if pos > end:
                raise self.truncated(last, f"a string of {key!r}")
            self.pos = pos
        else:  # nested arrays
            for _ in range(length):
                inner, inner_length = self.array_head(key, depth + 1)
                self.skip_items(inner, inner_length, key, depth + 1)

    def tensor(self, index: int) -> TensorInfo:
        name = self.string(f"the name of tensor #{index}")
        n_dims = self.u32(f"the dimension count of tensor {name!r}")
        if n_dims > GGML_MAX_DIMS:
            raise self.fail(f"tensor {name!r} has {n_dims} dimensions (at most {GGML_MAX_DIMS})")
        shape = struct.unpack_from(f"<{n_dims}Q", self.buf, self.need(8 * n_dims, f"the shape of {name!r}"))
        raw_type = self.u32(f"the type of tensor {name!r}")
        offset = self.u64(f"the data offset of tensor {name!r}")
        try:
            qtype = GGMLQuantizationType(raw_type)
            block_size, type_size = GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise self.fail(f"tensor {name!r} has ggml type {raw_type}, unknown to the installed "
                            f"gguf package (upgrade gguf?)") from None
        n_elements = 1
        for d in shape:
            n_elements *= d
        return TensorInfo(name=name, shape=tuple(shape), ggml_type=int(qtype), type_name=qtype.name,
                          n_elements=n_elements, n_bytes=n_elements * type_size // block_size,
                          offset=offset)


def _scan(buf: Any, size: int, path: str) -> GGUFHeader:
    s = _Scanner(buf, size, path)
    magic = s.u32("the magic number")
    if magic != GGUF_MAGIC:
        raise s.fail(f"not a GGUF file (magic {bytes(buf[0:4])!r}, expected b'GGUF')")
    version = s.u32("the version")
    if version & 0xFFFF == 0 and version != 0:
        raise s.fail("is a big-endian GGUF; only little-endian files are supported")
    if version not in SUPPORTED_VERSIONS:
        raise s.fail(f"unsupported GGUF version {version} (supported: {list(SUPPORTED_VERSIONS)})")
    n_tensors = s.u64("the tensor count")
    n_kv = s.u64("the metadata count")

    metadata: dict[str, Any] = {}
    alignment_type = None
    for _ in range(n_kv):
        key = s.string("a metadata key")
        vtype = s.value_type(key)
        if key in metadata:
            raise s.fail(f"duplicate metadata key {key!r}")
        metadata[key] = s.value(vtype, key)
        if key == "general.alignment":
            alignment_type = vtype

    tensors = []
    names = set()
    for i in range(n_tensors):
        info = s.tensor(i)
        if info.name in names:
            raise s.fail(f"duplicate tensor {info.name!r}")
        names.add(info.name)
        tensors.append(info)

    alignment = GGUF_DEFAULT_ALIGNMENT
    if alignment_type is not None:
        alignment = metadata["general.alignment"]
        if alignment_type != GGUFValueType.UINT32 or alignment <= 0 or alignment & (alignment - 1):
            raise s.fail(f"general.alignment must be a power-of-two UINT32, got {alignment!r}")
    data_offset = -(-s.pos // alignment) * alignment

    architecture = metadata.get("general.architecture")
    if not isinstance(architecture, str) or not architecture:
        raise s.fail("has no general.architecture string in its metadata")
    return GGUFHeader(path=path, version=version, architecture=architecture, metadata=metadata,
                      tensors=tuple(tensors), data_offset=data_offset, file_size=size)


def _scan_file(path: str, fd: int, size: int) -> GGUFHeader:
    if size == 0:
        raise GGUFHeaderError(path, "truncated inside the GGUF header at byte 0 (the file is empty): "
                                    "need more of the file")
    # mmap touches only the header's pages, however large the model is.
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
        return _scan(buf, size, path)


# --------------------------------------------------------------------------- cache

_MEMORY: dict[tuple[str, int, int], GGUFHeader] = {}


def cache_dir() -> Path:
    return cache_root() / "headers"


def clear_memory_cache() -> None:
    _MEMORY.clear()


def _to_json(h: GGUFHeader) -> dict[str, Any]:
    def enc(v: Any) -> Any:
        if isinstance(v, SkippedArray):
            return {"__skipped__": [int(v.item_type), v.length]}
        return v
    return {"version": h.version, "architecture": h.architecture,
            "metadata": {k: enc(v) for k, v in h.metadata.items()},
            "tensors": [dataclasses.astuple(t) for t in h.tensors],
            "data_offset": h.data_offset, "file_size": h.file_size}


def _from_json(d: dict[str, Any], path: str) -> GGUFHeader:
    def dec(v: Any) -> Any:
        if isinstance(v, dict):
            item_type, length = v["__skipped__"]
            return SkippedArray(GGUFValueType(item_type), length)
        return v
    tensors = tuple(TensorInfo(name, tuple(shape), *rest) for name, shape, *rest in d["tensors"])
    return GGUFHeader(path=path, version=d["version"], architecture=d["architecture"],
                      metadata={k: dec(v) for k, v in d["metadata"].items()}, tensors=tensors,
                      data_offset=d["data_offset"], file_size=d["file_size"])


def _disk_entry(key: tuple[str, int, int]) -> Path:
    digest = hashlib.sha256(f"{key[0]}\0{key[1]}\0{key[2]}".encode()).hexdigest()[:32]
    return cache_dir() / f"{digest}.json"


def _load_disk(key: tuple[str, int, int], path: str) -> GGUFHeader | None:
    try:
        d = json.loads(_disk_entry(key).read_text(encoding="utf-8"))
        if d.get("format") != CACHE_FORMAT or d.get("key") != list(key):
            return None
        return _from_json(d["header"], path)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or unreadable cache: scan again


def _save_disk(key: tuple[str, int, int], h: GGUFHeader) -> None:
    target = _disk_entry(key)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"format": CACHE_FORMAT, "key": list(key), "header": _to_json(h)}), encoding="utf-8")
        os.replace(tmp, target)  # readers never see a half-written entry
    except OSError:
        pass  # a read-only cache costs speed, never correctness


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def read_header(path: str | os.PathLike[str], *, use_cache: bool = True) -> GGUFHeader:
    """The header of the GGUF file at `path`; works on a header-only or truncated file."""
    shown = os.fspath(path)
    try:
        # O_NONBLOCK: opening a named pipe must not wait for a writer; it is refused just below.
        fd = os.open(shown, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise GGUFHeaderError(shown, f"cannot open ({e.strerror}); give the path of a .gguf file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise GGUFHeaderError(shown, f"is {_kind_of(st.st_mode)}, not a regular file; "
                                         f"give the path of a .gguf file")
        key = (os.path.realpath(shown), st.st_size, st.st_mtime_ns)
        if use_cache:
            h = _MEMORY.get(key) or _load_disk(key, shown)
            if h is not None:
                _MEMORY[key] = h
                return h if h.path == shown else dataclasses.replace(h, path=shown)
        h = _scan_file(shown, fd, st.st_size)
    finally:
        os.close(fd)
    if use_cache:
        _MEMORY[key] = h
        _save_disk(key, h)
    return h
