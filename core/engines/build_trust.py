"""A cached llama.cpp build is verified before it runs: a planted binary is rebuilt, never run.

The build cache outlives the job that made it (the nightly's runner keeps it from night to night),
and any job on that runner can write to it. So when lawbench finishes a build it writes
``build_manifest.json`` beside ``build_info.json``: the sha256 of every file under ``build/bin``
(the tools and the shared libraries they load), the sha256 of the source archive it was built
from, and — when ``$LAWBENCH_CACHE_KEY`` is set (a secret only the nightly's own jobs hold) — an
HMAC of all that, so a job without the secret cannot write a manifest that matches its plant.

Before a cached build is used, the manifest is checked: a changed, added or missing file, or a
bad signature, moves the build aside (``build.untrusted-<time>``, kept for a person to look at)
and it is built again from the source archive. A build made before manifests existed is adopted
once (its manifest written then) unless ``$LAWBENCH_CACHE_KEY`` is set, when it is rebuilt.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from pathlib import Path
from typing import Optional

MANIFEST = "build_manifest.json"
KEY_ENV = "LAWBENCH_CACHE_KEY"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files(bin_dir: Path) -> dict[str, str]:
    """Every file under build/bin: a symlink by its target (a planted link is a change too)."""
    out = {}
    for path in sorted(bin_dir.rglob("*")):
        name = str(path.relative_to(bin_dir))
        if path.is_symlink():
            out[name] = "link:" + os.readlink(path)
        elif path.is_file():
            out[name] = _sha256(path)
    return out


def _sign(body: dict) -> Optional[str]:
    key = os.environ.get(KEY_ENV)
    if not key:
        return None
    text = json.dumps(body, sort_keys=True).encode()
    return hmac.new(key.encode(), text, hashlib.sha256).hexdigest()


def write_manifest(key_dir: Path, source: Optional[Path] = None) -> dict:
    """Record what this build is: every binary's digest and the source archive's."""
    return _write(key_dir, source.name if source else None,
                  _sha256(source) if source and source.is_file() else None)


def _write(key_dir: Path, source: Optional[str], source_sha256: Optional[str]) -> dict:
    body = {"files": _files(key_dir / "build" / "bin"), "source": source, "source_sha256": source_sha256,
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    manifest = {**body, "hmac_sha256": _sign(body)}
    tmp = key_dir / f"{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2))
    os.replace(tmp, key_dir / MANIFEST)
    return manifest


def record_added(key_dir: Path) -> dict:
    """After tools were compiled into a verified build's own tree: record its files again, keeping
    the source archive the manifest already names (the tree and its source did not change)."""
    try:
        old = json.loads((key_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        old = {}
    return _write(key_dir, old.get("source"), old.get("source_sha256"))


def problem(key_dir: Path) -> Optional[str]:
    """Why the build in ``key_dir`` must not run (one line), or None when it is the build its
    manifest describes. "no manifest" is a build from before manifests (see adopt_or_refuse)."""
    try:
        manifest = json.loads((key_dir / MANIFEST).read_text())
    except FileNotFoundError:
        return "no manifest"
    except (OSError, ValueError) as exc:
        return f"its {MANIFEST} cannot be read ({exc})"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return f"its {MANIFEST} is not a manifest"
    body = {k: v for k, v in manifest.items() if k != "hmac_sha256"}
    if os.environ.get(KEY_ENV):
        want = _sign(body)
        if not isinstance(manifest.get("hmac_sha256"), str) or not hmac.compare_digest(want or "",
                                                                                      manifest["hmac_sha256"]):
            return f"its {MANIFEST} is not signed with ${KEY_ENV}"
    found = _files(key_dir / "build" / "bin")
    recorded = manifest["files"]
    changed = sorted(n for n in set(found) | set(recorded) if found.get(n) != recorded.get(n))
    if changed:
        what = ", ".join(f"{n} ({'added' if n not in recorded else 'missing' if n not in found else 'changed'})"
                         for n in changed[:3])
        return f"build/bin differs from its manifest: {what}" + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return None


def set_aside(key_dir: Path) -> Path:
    """Move an untrusted build (and its record) out of the way, kept for a person to inspect;
    the extracted source goes too, since it could have been changed as well."""
    aside = key_dir.with_name(f"{key_dir.name}.untrusted-{int(time.time())}")
    aside.mkdir()
    for name in ("build", "src", "build_info.json", MANIFEST):
        if (key_dir / name).exists():
            os.replace(key_dir / name, aside / name)
    return aside
