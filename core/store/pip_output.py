"""pip downloads' settings and output: the environment variables that bound a download, the
patterns lawbench recognises in ``pip download -vv`` output (pip 23 to 26 word things
differently), and the one-line DownloadError built from them, naming the requirement, the index,
what went wrong, pip's own words and what to do. Running pip is lawbench.core.store.pypi."""
from __future__ import annotations

import math
import os
import re
import shlex
import sys
from urllib.parse import urlsplit, urlunsplit

from lawbench.core.errors import UsageError
from lawbench.core.progress import size

INDEX_ENV = "LAWBENCH_PYPI_URL"
STALL_ENV = "LAWBENCH_STALL_TIMEOUT_S"
RETRIES_ENV = "LAWBENCH_DOWNLOAD_RETRIES"
TOTAL_ENV = "LAWBENCH_DOWNLOAD_TIMEOUT_S"
DEFAULT_STALL_S = 60.0
DEFAULT_RETRIES = 2
DEFAULT_TOTAL_S = 7200.0

# pip < 26 announces a file by its URL, pip 26 by its name; -vv's "Found link" lines give the URL.
ANNOUNCED = re.compile(r"^\s*(Downloading|Using cached) (\S+) \(([\d.]+) (bytes|B|kB|MB|GB)\)")
FOUND_LINK = re.compile(r"^\s*Found link ([^\s#,]+)")
RETRYING = re.compile(r"^\s*WARNING: Retrying \(Retry\(total=(\d+).*?broken by '(\w+).*: (\S+)$")
RESUMING = re.compile(r"^\s*WARNING: Attempting to resume incomplete download \((.+), attempt (\d+)\)$")
# "Read timed out. (read timeout=1.0)" before pip 26; "127.0.0.1 didn't respond within 1.0 seconds" after
TIMED_OUT = re.compile(r"timed out|didn't respond within|TimeoutError", re.IGNORECASE)
PIP_TIMEOUT = re.compile(r"(?:read timeout=|didn't respond within )([\d.]+)")
CUT_OFF = "not enough bytes were received"  # pip >= 25.1: a file that stopped partway, on every try
NOT_FETCHED = re.compile(r"^\s*Could not fetch URL (\S+): (.*?)(?: - skipping)?$")
BUILD_STEP = re.compile(r"^\s*(Installing build dependencies|Getting requirements to build \w+|"
                         r"Preparing metadata \(.*\)): (started|finished with status '\w+')$")
DIAGNOSTIC = re.compile(r"^error: [a-z][a-z0-9-]*$")  # pip's "error: <reference>", then "× what", "╰─> detail"
DIAGNOSED_URL = re.compile(r"^\W*(?:URL: |Unable to fetch )(\S+)")
FRAGMENT = re.compile(r"#sha256=[0-9a-f]+")
FROM_VERSIONS = re.compile(r"\(from versions: ([^)]*)\)")
EXCEPTION = re.compile(r"^(?:[\w]+\.)*(\w+): (.+)$")


class DownloadError(UsageError):
    """A download failed; the message names the URL and what to do (exit 2 at the command line)."""

    def __init__(self, message: str, url: str = ""):
        super().__init__(message)
        self.url = url


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


def redact(url: str) -> str:
    """An index URL without its password, as pip shows it."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="****@" + parts.netloc.rpartition("@")[2]))


def indexes(lines: list[str]) -> str:
    """The indexes pip looked in, and which setting chose them."""
    said = next((ln.split(":", 1)[1] for ln in lines if ln.startswith("Looking in indexes:")), "")
    looked = [u.strip() for u in said.split(",") if u.strip()]
    for env in (INDEX_ENV, "PIP_INDEX_URL"):
        value = os.environ.get(env, "").strip()
        if value:
            index = redact(value)
            more = [u for u in looked if u.rstrip("/") != index.rstrip("/")]
            return f"{index} (${env})" + (f" and {', '.join(more)} (pip's configuration)" if more else "")
    if looked:
        return f"{', '.join(looked)} (pip's configuration: pip config list)"
    return "PyPI, pip's configured index (pip config list)"


def _pip_said(lines: list[str]) -> list[str]:
    """pip's telling lines: its errors (with their indented detail), its diagnostic errors, pages it
    could not fetch, and the last line of a traceback when pip itself crashed."""
    said: list[str] = []
    in_error = False
    for at, ln in enumerate(lines):
        if ln.startswith("ERROR:") and ln != "ERROR: Exception:":
            said.append(ln)
            in_error = True
        elif in_error and ln.startswith(" ") and ln.strip():
            said[-1] += " " + " ".join(ln.split())
        else:
            in_error = False
            if m := NOT_FETCHED.match(ln):
                said.append(f"could not fetch {m.group(1)}: {m.group(2)}")
            elif DIAGNOSTIC.match(ln):
                said.append(_diagnostic(lines[at + 1:]))
    said = [FRAGMENT.sub("", FROM_VERSIONS.sub(_few_versions, ln)) for ln in said]
    if "ERROR: Exception:" in lines:
        tail = lines[lines.index("ERROR: Exception:"):]
        crash = [m for ln in tail if (m := EXCEPTION.match(ln)) and not ln.startswith("Traceback")]
        if crash:
            said.append(f"{crash[-1].group(1)}: {crash[-1].group(2)}")
    return list(dict.fromkeys(said))


def _diagnostic(after: list[str]) -> str:
    """What follows pip's "error: <reference>": its message and the first line of its context."""
    parts: list[str] = []
    for ln in after:
        if ln.startswith(("note:", "hint:", "Exception information:", "ERROR:", "error:")):
            break
        if ln.startswith("│") and parts:
            parts[-1] += " " + ln[1:].strip()
        elif ln.strip():
            if len(parts) == 2:
                break
            parts.append(ln.lstrip("×╰─> ").strip())
    return ": ".join(parts)


def _few_versions(m: re.Match) -> str:
    versions = m.group(1).split(", ")
    if len(versions) <= 8:
        return m.group(0)
    return f"(from versions: {versions[0]}, … {len(versions) - 7} more …, {', '.join(versions[-6:])})"


def _failing_url(lines: list[str], file: str) -> str:
    """The page pip could not fetch, else the file it was downloading (``file``: its URL where
    known, else its name), else the URL pip's diagnostic error names, else ''."""
    for ln in reversed(lines):
        if m := NOT_FETCHED.match(ln):
            return m.group(1)
    if file:
        return file
    return next((FRAGMENT.sub("", m.group(1)) for ln in lines if (m := DIAGNOSED_URL.match(ln))), "")


def _tried(lines: list[str], url: str) -> str:
    """How often pip asked for ``url``: once, and once more per retry or resume it announced."""
    path = urlsplit(url).path
    again = sum(1 for ln in lines if RESUMING.match(ln) or ((m := RETRYING.match(ln)) and m.group(3) == path))
    return f"pip tried {'once' if not again else f'{again + 1} times'} ({RETRIES_ENV}={retries()})"


def failure(requirement: str, cmd: list[str], rc: int, lines: list[str], file: str = "") -> DownloadError:
    said = _pip_said(lines) or [ln for ln in lines if ln.strip()][-3:] or [f"pip exited with status {rc}"]
    where, url = indexes(lines), _failing_url(lines, file)
    words = " ".join(said).lower()
    head = f"could not download {requirement} from {where}"
    waited = next((m.group(1) for ln in reversed(lines) if (m := PIP_TIMEOUT.search(ln))), f"{stall_timeout():g}")
    wait_longer = (f"check the network and pip's proxy and index settings, set {INDEX_ENV} to a "
                   f"reachable index, or wait longer with {STALL_ENV}")
    if CUT_OFF in words:
        what = (f"{url or 'the file'} stopped partway, sending nothing for {stall_timeout():g} s ({STALL_ENV}) "
                f"or closing the connection; {_tried(lines, url)}")
        todo = wait_longer
    elif TIMED_OUT.search(words):
        what = f"{url or 'the index'} sent nothing for {float(waited):g} s ({STALL_ENV}); {_tried(lines, url)}"
        todo = wait_longer
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


def stopped(cmd: list[str], lines: list[str], why: str, nbytes: int, file: str) -> DownloadError:
    requirement = cmd[-1]
    last = next((ln.strip() for ln in reversed(lines) if ln.strip()), "nothing")
    had = f"{size(nbytes)} of {file}" if file else size(nbytes)
    return DownloadError(f"could not download {requirement} from {indexes(lines)}: {why} (it had "
                         f"{had}; its last line: {last}). To fix: check the network, DNS "
                         f"and pip's proxy and index settings, or set {INDEX_ENV} to a reachable index",
                         _failing_url(lines, file) or indexes(lines))


def _shown(cmd: list[str]) -> list[str]:
    """The pip command as a person would type it: no password, no private folder."""
    shown = ["python" if a == sys.executable else redact(a) for a in cmd]
    at = shown.index("-d")
    return shown[:at] + ["-d", "."] + shown[at + 2:]
