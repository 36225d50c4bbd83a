"""The public record behind the seeds: the register's repository and minfer's, at pinned commits.

lawbench cites these repositories (paths, lines, a commit each) and never copies their files. What
it quotes is kept in one small cache, anchors/public_record.toml, so a test without network can
check every quote the claims inventory takes from them:

    [[repo]]        name = "FedericoTs/quantprobe", commit = "<40 hex>"
    [[file]]        repo, path, sha256 (of the file's bytes at the commit; "" when read without them)
    [[excerpt]]     repo, path, start, end (1-based, inclusive line numbers), text (those lines)

An inventory line quotes the record with `record = [{ repo, path, quote }]`; an explained line
names the files it looked at with `unencoded.looked = ["<repo>:<path>", …]`. `lawbench check`
refuses a record quote that is not inside a cached excerpt of its file and a looked-at file the
cache does not list. `lawbench record verify --git-dir REPO=DIR` re-reads every cached file and
excerpt from a clone (or a `fetch` mirror) at the pinned commit and reports any difference;
`lawbench record add` caches a new excerpt from such a clone (docs/public-record.md).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pydantic import Field, ValidationError, model_validator

from lawbench.core.errors import DataError, UsageError, validation_error
from lawbench.core.models import Strict
from lawbench.core.toml_read import read_toml

RECORD_FILE = "public_record.toml"
REPO_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$"


class RecordRepo(Strict):
    name: str = Field(pattern=REPO_NAME)
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    # where the text was read when it was cached: a clone/mirror, or the search index's read_file
    read_from: str = Field(min_length=1)


class RecordFile(Strict):
    repo: str = Field(pattern=REPO_NAME)
    path: str = Field(min_length=1)
    sha256: str = Field(pattern=r"^([0-9a-f]{64})?$")  # "" = read without its bytes (no clone held the commit)


class Excerpt(Strict):
    repo: str = Field(pattern=REPO_NAME)
    path: str = Field(min_length=1)
    start: int = Field(ge=1)
    end: int = Field(ge=1)
    text: str = Field(min_length=1)

    @model_validator(mode="after")
    def _ordered(self) -> "Excerpt":
        if self.end < self.start:
            raise ValueError(f"end: line {self.end} is before start {self.start}")
        if self.text.count("\n") != self.end - self.start:
            raise ValueError(f"text: holds {self.text.count(chr(10)) + 1} lines, but lines {self.start}-{self.end} "
                             f"are {self.end - self.start + 1}")
        return self


class RecordData(Strict):
    repo: list[RecordRepo] = Field(default_factory=list)
    file: list[RecordFile] = Field(default_factory=list)
    excerpt: list[Excerpt] = Field(default_factory=list)


def words(text: str) -> str:
    return " ".join(text.split())


def pieces(quote: str) -> list[str]:
    """A quote may elide with "[...]" or "…"; every piece between elisions must be verbatim."""
    return [p.strip() for p in re.split(r"\[\.\.\.\]|\[…\]|…", words(quote)) if p.strip()]


@dataclass
class Record:
    data: RecordData
    where: str

    @property
    def repos(self) -> dict[str, RecordRepo]:
        return {r.name: r for r in self.data.repo}

    def file(self, repo: str, path: str) -> Optional[RecordFile]:
        return next((f for f in self.data.file if f.repo == repo and f.path == path), None)

    def excerpts(self, repo: str, path: str) -> list[Excerpt]:
        return [e for e in self.data.excerpt if e.repo == repo and e.path == path]

    def missing_piece(self, repo: str, path: str, quote: str) -> Optional[str]:
        """The first piece of `quote` that no cached excerpt of the file holds (None: all are there)."""
        texts = [words(e.text) for e in self.excerpts(repo, path)]
        for piece in pieces(quote):
            if not any(piece in t for t in texts):
                return piece
        return None


def record_path() -> Any:
    from importlib.resources import files

    return files("lawbench.anchors") / RECORD_FILE


def load_record(path: Any = None) -> Record:
    path = record_path() if path is None else path
    raw = read_toml(path)
    try:
        data = RecordData.model_validate(raw)
    except ValidationError as exc:
        raise validation_error(str(path), exc) from None
    rec = Record(data, str(path))
    seen: set[tuple[str, str]] = set()
    for i, f in enumerate(data.file):
        if f.repo not in rec.repos:
            raise DataError(str(path), f"file {f.path}: repo {f.repo!r} has no [[repo]] table", field=f"file.{i}.repo")
        if (f.repo, f.path) in seen:
            raise DataError(str(path), f"file {f.repo}:{f.path} is listed twice", field=f"file.{i}.path")
        seen.add((f.repo, f.path))
    for i, e in enumerate(data.excerpt):
        if (e.repo, e.path) not in seen:
            raise DataError(str(path), f"excerpt of {e.repo}:{e.path} names no [[file]] entry: add one",
                            field=f"excerpt.{i}.path")
    return rec


# --------------------------------------------------------------------------- against a real clone


def _git(gitdir: Path, *args: str) -> bytes:
    done = subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True, timeout=60)
    if done.returncode:
        raise LookupError(done.stderr.decode("utf-8", "replace").strip() or f"git {' '.join(args)} failed")
    return done.stdout


def git_dir(path: str) -> Path:
    """A bare mirror (HEAD file inside) or a work tree's .git."""
    p = Path(path)
    return p / ".git" if (p / ".git").exists() else p


def file_at(gitdir: Path, commit: str, path: str) -> bytes:
    return _git(gitdir, "show", f"{commit}:{path}")


def lines_of(blob: bytes, start: int, end: int) -> str:
    lines = blob.decode("utf-8").splitlines()
    if end > len(lines):
        raise LookupError(f"has {len(lines)} lines, not {end}")
    return "\n".join(lines[start - 1:end])


def verify(rec: Record, gitdirs: dict[str, Path]) -> tuple[list[str], list[str]]:
    """Re-read every cached file and excerpt of the repositories given a clone. Returns (problems,
    not checked): a problem is a file whose bytes or an excerpt whose lines differ at the pin."""
    problems, unchecked = [], []
    for repo in rec.data.repo:
        gd = gitdirs.get(repo.name)
        if gd is None:
            unchecked.append(f"{repo.name}: no --git-dir given")
            continue
        try:
            _git(gd, "cat-file", "-e", f"{repo.commit}^{{commit}}")
        except LookupError:
            unchecked.append(f"{repo.name}: {gd} does not hold commit {repo.commit[:12]}")
            continue
        blobs: dict[str, bytes] = {}
        for f in (f for f in rec.data.file if f.repo == repo.name):
            try:
                blobs[f.path] = file_at(gd, repo.commit, f.path)
            except LookupError as exc:
                problems.append(f"{repo.name}:{f.path}: not at {repo.commit[:12]} ({exc})")
                continue
            got = hashlib.sha256(blobs[f.path]).hexdigest()
            if f.sha256 and got != f.sha256:
                problems.append(f"{repo.name}:{f.path}: sha256 {got} at {repo.commit[:12]}, cache says {f.sha256}")
        for e in (e for e in rec.data.excerpt if e.repo == repo.name and e.path in blobs):
            try:
                text = lines_of(blobs[e.path], e.start, e.end)
            except (LookupError, UnicodeDecodeError) as exc:
                problems.append(f"{repo.name}:{e.path}#L{e.start}-L{e.end}: {exc}")
                continue
            if text != e.text:
                problems.append(f"{repo.name}:{e.path}#L{e.start}-L{e.end}: the cached text is not the file's lines")
    return problems, unchecked


# --------------------------------------------------------------------------- writing the cache


def _s(value: str) -> str:
    # a JSON string with non-ASCII kept is a valid TOML basic string (same escapes)
    return json.dumps(value, ensure_ascii=False)


def dump(data: RecordData) -> str:
    out = ["# The public record behind the seeds, as lawbench quotes it: written by `lawbench record add`,",
           "# verified by `lawbench record verify` (lawbench.core.claims.public_record; docs/public-record.md). Do not",
           "# edit a text by hand: a cached excerpt must be the file's lines at the pinned commit.", ""]
    for r in data.repo:
        out += ["[[repo]]", f"name = {_s(r.name)}", f"commit = {_s(r.commit)}", f"read_from = {_s(r.read_from)}", ""]
    for f in sorted(data.file, key=lambda f: (f.repo, f.path)):
        out += ["[[file]]", f"repo = {_s(f.repo)}", f"path = {_s(f.path)}", f"sha256 = {_s(f.sha256)}", ""]
    for e in sorted(data.excerpt, key=lambda e: (e.repo, e.path, e.start)):
        out += ["[[excerpt]]", f"repo = {_s(e.repo)}", f"path = {_s(e.path)}", f"start = {e.start}",
                f"end = {e.end}", f"text = {_s(e.text)}", ""]
    return "\n".join(out)


def add_excerpt(rec: Record, repo: str, path: str, start: int, end: int, gitdir: Path) -> Excerpt:
    pinned = rec.repos.get(repo)
    if pinned is None:
        raise UsageError(f"{rec.where}: no [[repo]] named {repo!r}: pin it (name, commit) first")
    try:
        blob = file_at(gitdir, pinned.commit, path)
        text = lines_of(blob, start, end)
    except (LookupError, UnicodeDecodeError) as exc:
        raise UsageError(f"{repo}:{path} at {pinned.commit[:12]} in {gitdir}: {exc}") from None
    sha = hashlib.sha256(blob).hexdigest()
    if rec.file(repo, path) is None:
        rec.data.file.append(RecordFile(repo=repo, path=path, sha256=sha))
    ex = Excerpt(repo=repo, path=path, start=start, end=end, text=text)
    if not any((e.repo, e.path, e.start, e.end) == (repo, path, start, end) for e in rec.data.excerpt):
        rec.data.excerpt.append(ex)
    return ex


# --------------------------------------------------------------------------- the command


def _gitdirs(specs: list[str]) -> dict[str, Path]:
    out = {}
    for spec in specs:
        repo, sep, d = spec.partition("=")
        if not sep or not re.match(REPO_NAME, repo) or not d:
            raise UsageError(f"--git-dir {spec!r}: give OWNER/NAME=DIR, e.g. FedericoTs/quantprobe=/path/to/clone")
        out[repo] = git_dir(d)
    return out


def add_record_parser(sub: Any) -> None:
    p = sub.add_parser("record", help="the public record's quote cache: verify it against a clone, add an excerpt")
    rs = p.add_subparsers(dest="record_cmd", required=True)
    v = rs.add_parser("verify", help="re-read every cached file and excerpt from clones at the pinned commits")
    v.add_argument("--git-dir", action="append", default=[], metavar="OWNER/NAME=DIR")
    v.add_argument("--cache", default=None, help="the cache file (default: the shipped anchors/public_record.toml)")
    v.set_defaults(func=cmd_record_verify)
    a = rs.add_parser("add", help="cache lines START-END of a file, read from a clone at the pinned commit")
    a.add_argument("repo", metavar="OWNER/NAME")
    a.add_argument("path")
    a.add_argument("lines", metavar="START-END")
    a.add_argument("--git-dir", action="append", required=True, metavar="OWNER/NAME=DIR")
    a.add_argument("--cache", default=None)
    a.set_defaults(func=cmd_record_add)


def _cache(args: argparse.Namespace) -> tuple[Record, Path]:
    path = Path(args.cache) if args.cache else Path(str(record_path()))
    return load_record(path), path


def cmd_record_verify(args: argparse.Namespace) -> int:
    rec, path = _cache(args)
    problems, unchecked = verify(rec, _gitdirs(args.git_dir))
    for line in unchecked:
        print(f"not checked: {line}")
    for line in problems:
        print(f"lawbench: error: {path}: {line}")
    checked = len(rec.data.repo) - len(unchecked)
    print(f"{'FAIL' if problems else 'ok'}: {len(rec.data.file)} files, {len(rec.data.excerpt)} excerpts; "
          f"{checked} of {len(rec.data.repo)} repositories re-read at their pinned commit")
    return 1 if problems else 0


def cmd_record_add(args: argparse.Namespace) -> int:
    rec, path = _cache(args)
    m = re.fullmatch(r"(\d+)-(\d+)", args.lines)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < int(m.group(1)):
        raise UsageError(f"lines {args.lines!r}: give START-END, 1-based and inclusive, e.g. 12-14")
    gd = _gitdirs(args.git_dir).get(args.repo)
    if gd is None:
        raise UsageError(f"--git-dir: give one for {args.repo}")
    ex = add_excerpt(rec, args.repo, args.path, int(m.group(1)), int(m.group(2)), gd)
    path.write_text(dump(rec.data), encoding="utf-8")
    print(f"cached {ex.repo}:{ex.path}#L{ex.start}-L{ex.end} in {path}")
    return 0
