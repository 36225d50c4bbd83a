"""Download one release of one package with pip: never a hang, always progress.

``fetch(name, version, dest_dir)`` runs ``python -m pip download --no-deps``, so the download goes
where every pip command on this machine goes: pip's configuration (/etc/pip.conf, ``pip config``,
``PIP_*`` — index-url, extra-index-url, find-links, cert, proxy) applies unchanged.
``$LAWBENCH_PYPI_URL``, when set, is passed to pip as ``--index-url``; pip's extra indexes and
find-links still apply. pip checks the sha256 an index gives for a file (PEP 503's ``#sha256=``);
the model store checks the catalogue's sha256 of the file it extracts.

Never a hang: pip runs in a process group of its own (lawbench.core.procgroup, so it never outlives
lawbench) and waits at most ``$LAWBENCH_STALL_TIMEOUT_S`` seconds (default 60) for a byte on a
socket (``--timeout``) and tries a failed request ``$LAWBENCH_DOWNLOAD_RETRIES`` more times
(default 2, ``--retries``; also ``--resume-retries`` for a file cut off partway, where pip has it,
pip >= 25.1). Behind that, lawbench watches pip, which downloads into a private
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
import functools
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from lawbench.core.procgroup import end_group, group_ended, popen_group
from lawbench.core.progress import Meter, report
from lawbench.core.store import pip_output
from lawbench.core.store.pip_output import DownloadError

POLL_S = 0.2  # how often pip's folder and output are looked at
_ARCHIVES = (".whl", ".tar.gz", ".zip", ".tar.bz2", ".tgz")
_UNITS = {"bytes": 1, "B": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9}


def quiet_limit(stall: float, n_retries: int) -> float:
    """The longest pip may rightly print nothing and download nothing: a connect and a read
    timeout, urllib3's back-off before the last retry (0.25 s doubling, at most 120 s), a margin."""
    return 2 * stall + min(120.0, 0.25 * 2 ** max(n_retries - 1, 0)) + 5.0


@functools.cache
def _pip_resumes() -> bool:
    """Whether this pip has ``--resume-retries`` (25.1 on); asked once per process."""
    try:
        p = subprocess.run([sys.executable, "-m", "pip", "download", "--help"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--resume-retries" in p.stdout


def pip_command(name: str, version: str, kinds: tuple[str, ...], dest: Path) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--no-input", "--progress-bar", "off", "-vv", "--timeout", f"{pip_output.stall_timeout():g}",
           "--retries", str(pip_output.retries()), "-d", str(dest)]
    if _pip_resumes():  # else pip 26 tries a cut-off file 6 times, whatever $LAWBENCH_DOWNLOAD_RETRIES says
        cmd += ["--resume-retries", str(pip_output.retries())]
    if "sdist" not in kinds:
        cmd += ["--only-binary", ":all:"]
    elif "wheel" not in kinds:
        cmd += ["--no-binary", name]  # not :all:, which would build pip's build tools from source too
    index = os.environ.get(pip_output.INDEX_ENV, "").strip()
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
            raise pip_output.failure(requirement, cmd, rc, lines, watch.url)
        got = [p for p in out.iterdir() if p.is_file()]
        if len(got) != 1:
            raise DownloadError(f"pip download of {requirement} left {sorted(p.name for p in got)}, "
                                f"expected one archive", pip_output.indexes(lines))
        target = dest_dir / got[0].name
        os.replace(got[0], target)
    watch.finish(target.stat().st_size)
    return target


class _Watch:
    """Turns pip's output and its folder's growth into progress lines."""

    def __init__(self, requirement: str, size: Optional[int]):
        self.what = f"downloading {requirement}"
        self.meter = Meter(self.what, size)
        self.tries = pip_output.retries() + 1
        self.file = ""  # the file's name, once pip names it
        self.url = ""  # its URL, where pip says it
        self.links: dict[str, str] = {}  # file name -> URL, from pip's -vv "Found link" lines
        self.building = False  # pip is installing the tools that read an sdist's metadata

    def line(self, line: str) -> None:
        if m := pip_output.ANNOUNCED.match(line):
            verb, file, amount, unit = m.groups()
            cached = " from pip's cache" if verb == "Using cached" else ""
            if self.building:
                report(f"{self.what}: pip's build tools: {file} ({amount} {unit}){cached}")
                return
            if not self.file:
                self.file = file.rsplit("/", 1)[-1]
                self.url = file if "/" in file else self.links.get(self.file, "")
                if self.meter.total is None:
                    self.meter.total = int(float(amount) * _UNITS[unit])
            report(f"{self.what}: {self.url or file} ({amount} {unit}){cached}")
        elif m := pip_output.FOUND_LINK.match(line):
            self.links[m.group(1).rsplit("/", 1)[-1]] = m.group(1)
        elif m := pip_output.RETRYING.match(line):
            left, why, path = m.groups()
            report(f"{self.what}: {path} failed ({why}); pip is trying again "
                   f"({self.tries - int(left)} of {self.tries})")
        elif m := pip_output.RESUMING.match(line):
            report(f"{self.what}: {self.url or self.file} stopped at {m.group(1)}; pip is trying again "
                   f"({int(m.group(2)) + 1} of {self.tries})")
        elif line.lstrip().startswith("WARNING: Retrying"):
            report(f"{self.what}: {line.lstrip()[len('WARNING: '):]}")
        elif m := pip_output.BUILD_STEP.match(line):
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
    stall, total_s = pip_output.stall_timeout(), pip_output.total_timeout()
    quiet_s = quiet_limit(stall, pip_output.retries())
    env = {**os.environ, "TMPDIR": str(dirs[0]), "PYTHONUNBUFFERED": "1"}
    with open(log_path, "wb") as log:
        # its own group, ended by the supervisor should lawbench die mid-download
        proc = popen_group(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
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
                raise pip_output.stopped(cmd, lines, f"pip printed nothing and downloaded nothing for "
                               f"{quiet_s:.0f} s, longer than its own {stall:g} s timeout ({pip_output.STALL_ENV}) "
                               f"explains, and was stopped", seen[2], watch.url or watch.file)
            if now - started > total_s:
                end_group(proc)
                raise pip_output.stopped(cmd, lines, f"pip did not finish within {total_s:g} s ({pip_output.TOTAL_ENV}) "
                               f"and was stopped; raise {pip_output.TOTAL_ENV} for a slow link", seen[2], watch.url or watch.file)
            time.sleep(POLL_S)
    except BaseException:
        if proc.poll() is None:
            end_group(proc)  # an interrupt: pip and whatever it started go with us
        raise
    finally:
        group_ended(proc)


# --------------------------------------------------------------------------- errors
