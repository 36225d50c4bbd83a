"""A model file the cache hands out is the file the cache made: its sha256 is stamped beside it when
it is created (signed with $LAWBENCH_CACHE_KEY where the runner holds one) and checked before it is
used. A swapped file — issue 32's 0.4 MiB Q4_0 copied over syn-100m's, which turned Law 4's L-15
anchor into a quiet SKIP — is set aside and made again. Hashing a 400 MB file costs about a
second, so one process hashes a file once per (size, mtime_ns, ctime_ns, inode).

A real model's file is checked against its catalogue sha256; the ``.verified.json`` stamp beside it
only spares the re-hash of a file verified before. That stamp names the file's size, mtime_ns,
ctime_ns and inode and is signed the same way: a process without the key cannot write one that
matches a swapped file, and a swapped file cannot match a genuine stamp (rewriting a file, or
setting its mtime back, moves its ctime, which no user can set)."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from pathlib import Path
from typing import Optional

from lawbench.core.store.signing import KEY_ENV, sign

_seen: dict[tuple[str, int, int, int, int], str] = {}  # (path, size, mtime_ns, ctime_ns, inode) -> sha256


def _stamp_path(model: Path) -> Path:
    return model.with_name(model.name + ".sha256.json")


def sha256_of(model: Path) -> str:
    st = model.stat()
    key = (str(model), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if key not in _seen:
        h = hashlib.sha256()
        with open(model, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _seen[key] = h.hexdigest()
    return _seen[key]


def stamp(model: Path) -> None:
    """Record what ``model`` is now: call right after the cache created it."""
    body = {"file": model.name, "sha256": sha256_of(model), "size": model.stat().st_size}
    tmp = _stamp_path(model).with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({**body, "hmac_sha256": sign(body)}, indent=2), encoding="utf-8")
    os.replace(tmp, _stamp_path(model))


def _signed_body(path: Path) -> tuple[dict, Optional[str]]:
    """A stamp's fields without its signature, and why it cannot be trusted (None: it can; its
    signature is checked when $LAWBENCH_CACHE_KEY is set). FileNotFoundError when there is none:
    what a missing stamp means differs between synthetic and real models."""
    try:
        stamped = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as e:
        return {}, f"its stamp cannot be read ({e})"
    if not isinstance(stamped, dict):
        return {}, "its stamp is not a JSON object"
    body = {k: v for k, v in stamped.items() if k != "hmac_sha256"}
    if os.environ.get(KEY_ENV):
        want = sign(body) or ""
        if not isinstance(stamped.get("hmac_sha256"), str) or not hmac.compare_digest(want, stamped["hmac_sha256"]):
            return body, f"its stamp is not signed with ${KEY_ENV}"
    return body, None


def problem(model: Path) -> Optional[str]:
    """Why ``model`` must not be used (None: it is the file its stamp names). A file without a stamp
    (made before stamps) is stamped now, unless $LAWBENCH_CACHE_KEY is set: then it is made again."""
    try:
        body, bad = _signed_body(_stamp_path(model))
    except FileNotFoundError:
        if os.environ.get(KEY_ENV):
            return "it has no stamp"
        stamp(model)
        return None
    if bad:
        return bad
    if body.get("file") != model.name or body.get("sha256") != sha256_of(model):
        return f"it hashes to sha256:{sha256_of(model)[:16]}…, not the sha256 stamped when it was made"
    return None


def set_aside(model: Path) -> Path:
    """Move a model that failed its check (and its stamp) out of the way, kept for a person to inspect."""
    aside = model.with_name(f"{model.name}.untrusted-{int(time.time())}")
    os.replace(model, aside)
    if _stamp_path(model).exists():
        os.replace(_stamp_path(model), aside.with_name(aside.name + ".sha256.json"))
    return aside


# --------------------------------------------------------------------------- real models' stamps


def verified_stamp(model: Path) -> Path:
    return model.with_name(model.name + ".verified.json")


def _state(model: Path, sha256: str) -> dict:
    st = model.stat()
    return {"file": model.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "ino": st.st_ino, "sha256": sha256}


def verified_problem(model: Path, sha256: str) -> Optional[str]:
    """Why the stamp beside a real model does not spare re-hashing it (None: it names this very
    file, unchanged since it hashed to ``sha256``). "its stamp is not signed …" is the one answer
    that says someone other than lawbench wrote it (RunRecord.cache_repairs lists it)."""
    try:
        body, bad = _signed_body(verified_stamp(model))
    except FileNotFoundError:
        return "no stamp"
    if bad:
        return bad
    return None if body == _state(model, sha256) else "the file changed since its stamp"


def write_verified(model: Path, sha256: str) -> None:
    """Record that ``model``, as it is now, hashed to ``sha256`` (call right after hashing it)."""
    body = _state(model, sha256)
    tmp = verified_stamp(model).with_suffix(f".{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps({**body, "hmac_sha256": sign(body)}), encoding="utf-8")
        os.replace(tmp, verified_stamp(model))
    except OSError:
        pass  # a read-only cache (a runner's own model folder): the next run hashes again
