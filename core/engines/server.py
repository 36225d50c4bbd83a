"""llama-server as an instrument: one server process, a few /completion requests, their timings.

llama-bench cannot speculate; llama.cpp's own server can (--spec-type, a draft model, n-gram
drafters, MTP heads) and answers each /completion with a ``timings`` object (predicted_n,
predicted_per_second, draft_n, draft_n_accepted, …): JSON, never scraped text.

``serve(llama, model, requests, ...)`` starts llama-server on a free 127.0.0.1 port in its own
process group (lawbench.core.procgroup: the supervisor ends it even after `kill -9` of lawbench,
and it holds the box lock while it runs), waits for /health, posts the requests in order on that one server, and always ends
the group — on success, on an error, on a timeout and on KeyboardInterrupt — so no server outlives
its visit. Every fault is an EngineError (EngineInterrupted on an interrupt) naming the command.
Only 127.0.0.1 is ever contacted (urllib from the stdlib; proxies are bypassed).
"""
from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from lawbench.core.engines.llamacpp import LlamaCpp
from lawbench.core.errors import EngineError, EngineInterrupted
from lawbench.core.procgroup import group_ended, popen_group, stop_group

SERVER = "llama-server"
HOST = "127.0.0.1"
LOG_TAIL_LINES = 15
_POLL_S = 0.1

# A proxy from the environment must never see a request for 127.0.0.1.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Request:
    """One /completion request. temperature 0 and a fixed seed: a speculative and a plain arm
    then decode the same tokens, so their speeds compare the same work. No prompt cache by
    default, so a request never reuses the previous one's KV (register D-10's replay artifact);
    ``cache_prompt`` asks the server to keep it, so a later request of the same server that starts
    with the same tokens processes only the rest (its ``timings.prompt_n`` and ``prompt_ms``)."""

    prompt: str
    n_predict: int
    ignore_eos: bool = False
    timeout_s: float = 600.0
    cache_prompt: bool = False

    def body(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "n_predict": self.n_predict, "temperature": 0.0, "seed": 0,
                "cache_prompt": self.cache_prompt, "ignore_eos": self.ignore_eos, "stream": False}


@dataclass
class ServerRun:
    """What one server process answered: one response per request, in order."""

    cmd: list[str]
    responses: list[dict[str, Any]]
    wall_s: float
    log_tail: str = ""

    @property
    def timings(self) -> list[dict[str, Any]]:
        return [r["timings"] for r in self.responses]


@dataclass(frozen=True)
class Speculation:
    """llama-server's speculation flags. ``type`` is a --spec-type name of the build ("none",
    "draft-simple", "draft-mtp", "ngram-simple", "ngram-mod", …); the rest are passed only when set."""

    type: str = "none"
    draft_model: Optional[Path] = None  # -md
    draft_max: Optional[int] = None  # --spec-draft-n-max (model drafts)
    draft_min: Optional[int] = None  # --spec-draft-n-min
    draft_gpu_layers: Optional[int] = None  # -ngld
    ngram_size_n: Optional[int] = None  # --spec-ngram-<kind>-size-n (lookup length)
    ngram_size_m: Optional[int] = None  # --spec-ngram-<kind>-size-m (draft length)
    extra: tuple[str, ...] = field(default_factory=tuple)

    def args(self) -> list[str]:
        if self.type == "none":
            return []
        out = ["--spec-type", self.type]
        if self.draft_model is not None:
            out += ["-md", str(self.draft_model)]
        for flag, value in (("--spec-draft-n-max", self.draft_max), ("--spec-draft-n-min", self.draft_min),
                            ("-ngld", self.draft_gpu_layers)):
            if value is not None:
                out += [flag, str(value)]
        kind = self.type.removeprefix("ngram-") if self.type.startswith("ngram-") else None
        for part, value in (("n", self.ngram_size_n), ("m", self.ngram_size_m)):
            if value is not None:
                if kind is None:
                    raise EngineError(f"--spec-type {self.type}: ngram_size_{part} applies to an ngram-* drafter only")
                out += [f"--spec-ngram-{kind}-size-{part}", str(value)]
        return out + list(self.extra)


def server_binary(llama: LlamaCpp) -> Path:
    from lawbench.core.engines.tools import require_tool

    return require_tool(llama, SERVER)  # compiled into a lawbench build the first time a run needs it


def free_port() -> int:
    """A port the kernel has just found free on 127.0.0.1 (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def server_command(llama: LlamaCpp, model: Union[Path, str], port: int, *, ctx: int = 4096,
                   threads: Optional[int] = None, n_gpu_layers: Optional[int] = None,
                   spec: Optional[Speculation] = None, extra_args: Sequence[str] = ()) -> list[str]:
    """One slot (-np 1): a single user, as the register measured; no web UI; bound to 127.0.0.1."""
    cmd = [str(server_binary(llama)), "-m", str(model), "--host", HOST, "--port", str(port),
           "-c", str(ctx), "-np", "1", "--no-webui"]
    if threads is not None:
        cmd += ["-t", str(threads)]
    if n_gpu_layers is not None:
        cmd += ["-ngl", str(n_gpu_layers)]
    return cmd + (spec.args() if spec else []) + list(extra_args)


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace", encoding="utf-8").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-LOG_TAIL_LINES:])


def _get(port: int, path: str, timeout_s: float) -> tuple[int, dict[str, Any]]:
    try:
        with _OPENER.open(f"http://{HOST}:{port}{path}", timeout=timeout_s) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as exc:  # 503 while the model loads
        return exc.code, {}


def _post(port: int, path: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(f"http://{HOST}:{port}{path}", data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with _OPENER.open(req, timeout=timeout_s) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise EngineError(f"{SERVER} answered {path} with HTTP {exc.code}: {detail}") from None


def _wait_ready(proc: subprocess.Popen, port: int, deadline: float, log: Path) -> None:
    while True:
        if proc.poll() is not None:
            raise EngineError(f"{SERVER} exited with code {proc.returncode} before it was ready:\n{_tail(log)}")
        try:
            status, _ = _get(port, "/health", timeout_s=2.0)
            if status == 200:
                return
        except (OSError, ValueError):  # not listening yet
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("not ready")
        time.sleep(_POLL_S)


def serve(llama: LlamaCpp, model: Union[Path, str], requests: Sequence[Request], *,
          load_timeout_s: float = 300.0, **command: Any) -> ServerRun:
    """Start one server, send ``requests`` in order, stop it; the responses carry ``timings``.

    :param load_timeout_s: how long the model may take to load (until /health says ok).
    :param command: server_command's keyword arguments (ctx, threads, n_gpu_layers, spec, extra_args).
    :raises EngineError: the server is missing, exited, timed out, or answered without timings;
        the message names the command and ends with the server log's tail.
    :raises EngineInterrupted: SIGINT/SIGTERM arrived; the server's group was ended first.
    """
    port = free_port()
    cmd = server_command(llama, model, port, **command)
    shown = shlex.join(cmd)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lawbench-server-") as tmp:
        log = Path(tmp) / "server.log"  # a file, not a pipe: a chatty server never blocks on it
        with open(log, "w", encoding="utf-8") as sink:
            try:
                proc = popen_group(cmd, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                   env={**os.environ, "NO_PROXY": HOST})
            except OSError as exc:
                raise EngineError(f"{SERVER} cannot be started ({exc.strerror or exc}): {shown}") from None
            stage, limit = "loading the model", load_timeout_s
            try:
                _wait_ready(proc, port, t0 + load_timeout_s, log)
                responses = []
                for i, req in enumerate(requests):
                    stage, limit = f"answering request {i + 1} of {len(requests)}", req.timeout_s
                    resp = _post(port, "/completion", req.body(), req.timeout_s)
                    if not isinstance(resp.get("timings"), dict) or "predicted_per_second" not in resp["timings"]:
                        raise EngineError(f"{SERVER} answered /completion without timings.predicted_per_second")
                    responses.append(resp)
                return ServerRun(cmd=cmd, responses=responses, wall_s=time.monotonic() - t0, log_tail=_tail(log))
            except KeyboardInterrupt as exc:
                _stop(proc)
                name = EngineInterrupted.signal_of(exc)
                raise EngineInterrupted(f"{SERVER} on {Path(model).name} was interrupted by {name} while "
                                        f"{stage}; its process group was ended; command: {shown}",
                                        signal_name=name) from None
            except TimeoutError:  # socket timeouts are TimeoutError too
                _stop(proc)
                raise EngineError(f"{SERVER} on {Path(model).name} did not finish {stage} within {limit:g} s "
                                  f"and was killed; command: {shown}\n{_tail(log)}", log=_tail(log)) from None
            except (EngineError, OSError, ValueError) as exc:
                _stop(proc)
                if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, TimeoutError):
                    raise EngineError(f"{SERVER} on {Path(model).name} did not finish {stage} within "
                                      f"{limit:g} s and was killed; command: {shown}\n{_tail(log)}",
                                      log=_tail(log)) from None
                msg = str(exc) if isinstance(exc, EngineError) else f"{type(exc).__name__}: {exc}"
                tail = "" if "\n" in msg else f"\n{_tail(log)}"
                raise EngineError(f"{SERVER} on {Path(model).name} failed {stage}: {msg}; command: {shown}{tail}",
                                  log=_tail(log)) from None
            finally:
                _stop(proc)  # idempotent: the group is ended on every path, success included


def _stop(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM first (the server frees its model and exits), then the whole group by SIGKILL; the
    supervisor then forgets the group."""
    stop_group(proc, grace_s)
    group_ended(proc)
