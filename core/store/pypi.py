"""Download one release of one package with pip: never a hang, always progress.

``fetch(name, version, dest_dir)`` runs ``python -m pip download --no-deps``, so the download goes
where every pip command on this machine goes: pip's configuration (/etc/pip.conf, ``pip config``,
``PIP_*`` — index-url, extra-index-url, find-links, cert, proxy) applies unchanged.
``$LAWBENCH_PYPI_URL``, when set, is passed to pip as ``--index-url``; pip's extra indexes and
find-links still apply. pip checks the sha256 an index gives for a file (PEP 503's ``#sha256=``);
the model store checks the catalogue's sha256 of the file it extracts.

Never a hang: pip waits at most ``$LAWBENCH_STALL_TIMEOUT_S`` seconds (default 60) for a byte on a
socket (``--timeout``) and tries a failed request ``$LAWBENCH_DOWNLOAD_RETRIES`` more times
(default 2, ``--retries``). Behind that, lawbench watches pip, which downloads into a private
TMPDIR: when neither that folder grows nor pip prints a line for longer than pip's own timeouts
explain (a name that never resolves, a stuck build backend), or the whole call passes
``$LAWBENCH_DOWNLOAD_TIMEOUT_S`` (default 7200), pip's process group is ended.

Progress: pip shows no byte progress when its output is not a terminal, so lawbench reports the
download's size every few seconds through lawbench.core.progress, seen inside an anchor run too.
A failure is a ``DownloadError`` (exit 2 at the command line, an ERROR verdict inside a run)
naming the requirement, the index, pip's own words and what to do.
"""
from __future__ import annotations

import codecs
import importlib.util
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit, urlunsplit

from lawbench.core.errors import UsageError
from lawbench.core.progress import Meter, report, size

INDEX_ENV = "LAWBENCH_PYPI_URL"
STALL_ENV = "LAWBENCH_STALL_TIMEOUT_S"
DEFAULT_STALL_S = 60.0
RETRIES_ENV = "LAWBENCH_DOWNLOAD_RETRIES"
DEFAULT_RETRIES = 2
TOTAL_ENV = "LAWBENCH_DOWNLOAD_TIMEOUT_S"
DEFAULT_TOTAL_S = 7200.0
POLL_S = 0.2  # how often pip's folder and output are looked at
_ARCHIVES = (".whl", ".tar.gz", ".zip", ".tar.bz2", ".tgz")
_UNITS = {"B": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9}
_ANNOUNCED = re.compile(r"^\s*(Downloading|Using cached) (\S+) \(([\d.]+) (B|kB|MB|GB)\)")
_RETRYING = re.compile(r"^WARNING: Retrying \(Retry\(total=(\d+).*?broken by '(\w+).*: (\S+)$")
_NOT_FETCHED = re.compile(r"^\s*Could not fetch URL (\S+): (.*?)(?: - skipping)?$")
_BUILD_STEP = re.compile(r"^\s*(Installing build dependencies|Getting requirements to build \w+|"
                         r"Preparing metadata \(.*\)): (started|finished with status '\w+')$")
_FROM_VERSIONS = re.compile(r"\(from versions: ([^)]*)\)")
_EXCEPTION = re.compile(r"^(?:[\w]+\.)*(\w+): (.+)$")


class DownloadError(UsageError):
    """A download failed; the message names the URL and what to do (exit 2 at the command line)."""

    def __init__(self, message: str, url: str = ""):
        super().__init__(message)
        self.url = url


# --------------------------------------------------------------------------- settings


def env_seconds(name: str, default: float) -> float:
    """A number of seconds (or tries) >= 0 from the environment; UsageError naming it if malformed."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{name}={raw!r} is not a number of seconds or tries >= 0")
    return value


def stall_timeout() -> float:
    """Seconds pip may wait for a byte on a socket before the request fails."""
    return env_seconds(STALL_ENV, DEFAULT_STALL_S) or DEFAULT_STALL_S


def retries() -> int:
    return int(env_seconds(RETRIES_ENV, DEFAULT_RETRIES))


def total_timeout() -> float:
    return env_seconds(TOTAL_ENV, DEFAULT_TOTAL_S) or DEFAULT_TOTAL_S


def quiet_limit(stall: float, n_retries: int) -> float:
    """The longest pip may rightly print nothing and download nothing: a connect and a read
    timeout, urllib3's back-off before the last retry (0.25 s doubling, at most 120 s), a margin."""
    return 2 * stall + min(120.0, 0.25 * 2 ** max(n_retries - 1, 0)) + 5.0


def _redact(url: str) -> str:
    """An index URL without its password, as pip shows it."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="****@" + parts.netloc.rpartition("@")[2]))


def pip_command(name: str, version: str, kinds: tuple[str, ...], dest: Path) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--no-input", "--progress-bar", "off", "-vv", "--timeout", f"{stall_timeout():g}",
           "--retries", str(retries()), "-d", str(dest)]
    if "sdist" not in kinds:
        cmd += ["--only-binary", ":all:"]
    elif "wheel" not in kinds:
        cmd += ["--no-binary", name]  # not :all:, which would build pip's build tools from source too
    index = os.environ.get(INDEX_ENV, "").strip()
    if index:
        cmd += ["--index-url", index]
    return cmd + [f"{name}=={version}"]


# --------------------------------------------------------------------------- fetching


def fetch(name: str, version: str, dest_dir: Path, kinds: tuple[str, ...] = ("wheel", "sdist"),
          size: Optional[int] = None) -> Path:
    """Download ``name==version`` (a wheel, else the sdist, as pip chooses; or only ``kinds``)
    into ``dest_dir`` with pip. Returns the file's path.

    :param size: the file's size in bytes where the caller knows it, for the progress lines;
        otherwise the size pip announces is used.
    :raises DownloadError: naming the requirement, the index, pip's words and what to do.
    """
    requirement = f"{name}=={version}"
    if importlib.util.find_spec("pip") is None:
        raise DownloadError(f"cannot download {requirement}: pip is not installed in {sys.executable}'s "
                            f"environment; install it ({sys.executable} -m ensurepip)")
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pip-", dir=dest_dir) as work:
        tmp, out = Path(work) / "tmp", Path(work) / "out"
        tmp.mkdir()
        out.mkdir()
        cmd = pip_command(name, version, kinds, out)
        watch = _Watch(requirement, size)
        rc, lines = _run(cmd, Path(work) / "pip.log", [tmp, out], watch)
        if rc != 0:
            raise _failure(requirement, cmd, rc, lines)
        got = [p for p in out.iterdir() if p.is_file()]
        if len(got) != 1:
            raise DownloadError(f"pip download of {requirement} left {sorted(p.name for p in got)}, "
                                f"expected one archive", _index(lines))
        target = dest_dir / got[0].name
        os.replace(got[0], target)
    watch.finish(target.stat().st_size)
    return target


class _Watch:
    """Turns pip's output and its folder's growth into progress lines."""

    def __init__(self, requirement: str, size: Optional[int]):
        self.what = f"downloading {requirement}"
        self.meter = Meter(self.what, size)
        self.tries = retries() + 1
        self.file = ""  # the file's name, once pip names it
        self.building = False  # pip is installing the tools that read an sdist's metadata

    def line(self, line: str) -> None:
        if m := _ANNOUNCED.match(line):
            verb, file, amount, unit = m.groups()
            cached = " from pip's cache" if verb == "Using cached" else ""
            if self.building:
                report(f"{self.what}: pip's build tools: {file} ({amount} {unit}){cached}")
                return
            if not self.file:
                self.file = file.rsplit("/", 1)[-1]
                if self.meter.total is None:
                    self.meter.total = int(float(amount) * _UNITS[unit])
            report(f"{self.what}: {file} ({amount} {unit}){cached}")
        elif m := _RETRYING.match(line):
            left, why, path = m.groups()
            report(f"{self.what}: {path} failed ({why}); pip is trying again "
                   f"({self.tries - int(left)} of {self.tries})")
        elif line.startswith("WARNING: Retrying"):
            report(f"{self.what}: {line[len('WARNING: '):]}")
        elif m := _BUILD_STEP.match(line):
            self.building = m.group(1) == "Installing build dependencies" and m.group(2) == "started"
            report(f"{self.what}: pip: {m.group(1)}: {m.group(2)}")

    def grown_to(self, nbytes: int) -> None:
        if nbytes > self.meter.done_bytes:
            self.meter.add(nbytes - self.meter.done_bytes)

    def finish(self, nbytes: int) -> None:
        self.grown_to(nbytes)
        self.meter.finish()


def _folder_state(dirs: list[Path], name: str) -> tuple[int, int, int]:
    """(bytes, files, largest file called ``name`` — or any archive before pip names it) under
    ``dirs``: pip's download, its unpacking, its build tools."""
    total = count = largest = 0
    for top in dirs:
        for root, _, files in os.walk(top):
            for f in files:
                try:
                    n = os.stat(os.path.join(root, f)).st_size
                except OSError:
                    continue  # pip removed it meanwhile
                total, count = total + n, count + 1
                if f == name or not name and f.endswith(_ARCHIVES):
                    largest = max(largest, n)
    return total, count, largest


def _run(cmd: list[str], log_path: Path, dirs: list[Path], watch: _Watch) -> tuple[int, list[str]]:
    """Run pip in its own process group with its output going to ``log_path``; end the group when
    it goes quiet or runs too long. Returns pip's exit status and its output lines."""
    from lawbench.core.engines.bench import end_group

    stall, total_s = stall_timeout(), total_timeout()
    quiet_s = quiet_limit(stall, retries())
    env = {**os.environ, "TMPDIR": str(dirs[0]), "PYTHONUNBUFFERED": "1"}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
    lines: list[str] = []
    partial, offset = "", 0
    decode = codecs.getincrementaldecoder("utf-8")("replace").decode  # a read may end mid-character
    started = last_change = time.monotonic()
    state = None
    try:
        while True:
            finished = proc.poll() is not None  # before reading, so its last lines are read
            with open(log_path, "rb") as log:
                log.seek(offset)
                chunk = log.read()
            offset += len(chunk)
            *new, partial = (partial + decode(chunk)).split("\n")
            for line in new:
                lines.append(line.rstrip())
                watch.line(line.rstrip())
            now = time.monotonic()
            seen = _folder_state(dirs, watch.file)
            if new or seen[:2] != state:
                state, last_change = seen[:2], now
            watch.grown_to(seen[2])
            if finished:
                if partial:
                    lines.append(partial.rstrip())
                return proc.returncode, lines
            if now - last_change > quiet_s:
                end_group(proc)
                raise _stopped(cmd, lines, f"pip printed nothing and downloaded nothing for "
                               f"{quiet_s:.0f} s, longer than its own {stall:g} s timeout ({STALL_ENV}) "
                               f"explains, and was stopped", seen[2])
            if now - started > total_s:
                end_group(proc)
                raise _stopped(cmd, lines, f"pip did not finish within {total_s:g} s ({TOTAL_ENV}) "
                               f"and was stopped; raise {TOTAL_ENV} for a slow link", seen[2])
            time.sleep(POLL_S)
    except BaseException:
        if proc.poll() is None:
            end_group(proc)  # an interrupt: pip and whatever it started go with us
        raise


# --------------------------------------------------------------------------- errors


def _index(lines: list[str]) -> str:
    """The indexes pip looked in, and which setting chose them."""
    said = next((ln.split(":", 1)[1] for ln in lines if ln.startswith("Looking in indexes:")), "")
    looked = [u.strip() for u in said.split(",") if u.strip()]
    for env in (INDEX_ENV, "PIP_INDEX_URL"):
        value = os.environ.get(env, "").strip()
        if value:
            index = _redact(value)
            more = [u for u in looked if u.rstrip("/") != index.rstrip("/")]
            return f"{index} (${env})" + (f" and {', '.join(more)} (pip's configuration)" if more else "")
    if looked:
        return f"{', '.join(looked)} (pip's configuration: pip config list)"
    return "PyPI, pip's configured index (pip config list)"


def _pip_said(lines: list[str]) -> list[str]:
    """pip's telling lines: its errors (with their indented detail), pages it could not fetch,
    and the last line of a traceback when pip itself crashed."""
    said: list[str] = []
    in_error = False
    for ln in lines:
        if ln.startswith("ERROR:") and ln != "ERROR: Exception:":
            said.append(ln)
            in_error = True
        elif in_error and ln.startswith(" ") and ln.strip():
            said[-1] += " " + " ".join(ln.split())
        else:
            in_error = False
            if m := _NOT_FETCHED.match(ln):
                said.append(f"could not fetch {m.group(1)}: {m.group(2)}")
    said = [_FROM_VERSIONS.sub(_few_versions, ln) for ln in said]
    if "ERROR: Exception:" in lines:
        tail = lines[lines.index("ERROR: Exception:"):]
        crash = [m for ln in tail if (m := _EXCEPTION.match(ln)) and not ln.startswith("Traceback")]
        if crash:
            said.append(f"{crash[-1].group(1)}: {crash[-1].group(2)}")
    return list(dict.fromkeys(said))


def _few_versions(m: re.Match) -> str:
    versions = m.group(1).split(", ")
    if len(versions) <= 8:
        return m.group(0)
    return f"(from versions: {versions[0]}, … {len(versions) - 7} more …, {', '.join(versions[-6:])})"


def _failing_url(lines: list[str]) -> str:
    """The page pip could not fetch, else the file it was downloading, else ''."""
    for ln in reversed(lines):
        if m := _NOT_FETCHED.match(ln):
            return m.group(1)
    for ln in reversed(lines):
        if m := _ANNOUNCED.match(ln):
            return m.group(2)
    return ""


def _failure(requirement: str, cmd: list[str], rc: int, lines: list[str]) -> DownloadError:
    said = _pip_said(lines) or [ln for ln in lines if ln.strip()][-3:] or [f"pip exited with status {rc}"]
    where, url = _index(lines), _failing_url(lines)
    words = " ".join(said).lower()
    head = f"could not download {requirement} from {where}"
    if "timed out" in words:
        what = (f"{url or 'the index'} sent nothing for {stall_timeout():g} s ({STALL_ENV}) "
                f"on any of {retries() + 1} tries ({RETRIES_ENV}={retries()})")
        todo = (f"check the network and pip's proxy and index settings, set {INDEX_ENV} to a "
                f"reachable index, or wait longer with {STALL_ENV}")
    elif "do not match the hashes" in words:
        what = f"{url or 'the file'} does not match the sha256 the index gives for it"
        todo = "try again; if it repeats, the index or a proxy serves a changed file: tell its keeper"
    elif url and "could not fetch" in words:
        what = f"{url} could not be reached"
        todo = f"check the network and pip's proxy and index settings, or set {INDEX_ENV} to a reachable index"
    elif "no matching distribution" in words:
        what = f"no {requirement} there"
        todo = f"check the name and version, or set {INDEX_ENV} to an index that has it"
    else:
        what = f"pip exited with status {rc}"
        todo = f"run it by hand to see more: {shlex.join(_shown(cmd))}"
    return DownloadError(f"{head}: {what}. pip said: {' | '.join(said).rstrip('.')}. To fix: {todo}",
                         url or where)


def _stopped(cmd: list[str], lines: list[str], why: str, nbytes: int) -> DownloadError:
    requirement = cmd[-1]
    last = next((ln.strip() for ln in reversed(lines) if ln.strip()), "nothing")
    return DownloadError(f"could not download {requirement} from {_index(lines)}: {why} (it had "
                         f"{size(nbytes)}; its last line: {last}). To fix: check the network, DNS "
                         f"and pip's proxy and index settings, or set {INDEX_ENV} to a reachable index",
                         _failing_url(lines) or _index(lines))


def _shown(cmd: list[str]) -> list[str]:
    """The pip command as a person would type it: no password, no private folder."""
    shown = ["python" if a == sys.executable else _redact(a) for a in cmd]
    at = shown.index("-d")
    return shown[:at] + ["-d", "."] + shown[at + 2:]
