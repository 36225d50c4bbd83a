"""The text a perplexity case scores: one lawbench ships, or one file of the public record.

    text = "python-reference-3.11.txt"                      # shipped (anchors/texts/)
    text = { repo = "FedericoTs/quantprobe", commit = "f02d7cce…", path = "weights/data/wikitext2_test.txt",
             sha256 = "696cca6b…" }                          # the record's own file, pinned

A record text is cited, never copied into lawbench: a runner fetches it once into the cache
(``<cache>/texts/``) from ``$LAWBENCH_RECORD_URL`` (default raw.githubusercontent.com) at the
pinned commit and keeps it only when its SHA-256 is the pinned one. Where it is absent and cannot
be fetched (no network here) the anchor is a SKIP naming the text and the address; on its own
runner, or under --strict, that skip is a FAIL (lawbench.core.run.evaluate). A file in the cache
whose hash differs is set aside and is an error, never scored.
"""
from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated, Union

from pydantic import Discriminator, Field, Tag

from lawbench.core.errors import EngineError, LawbenchError, NotApplicable
from lawbench.core.models.base import Strict
from lawbench.core.paths import cache_root
from lawbench.core.store.real import sha256_of

RECORD_URL_ENV = "LAWBENCH_RECORD_URL"
DEFAULT_RECORD_URL = "https://raw.githubusercontent.com"
FETCH_TIMEOUT_S = 60.0


class RecordText(Strict):
    """A file of a public repository at one commit, known by its SHA-256."""

    repo: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")]
    commit: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
    path: Annotated[str, Field(min_length=1, pattern=r"^[^/].*[^/]$")]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]

    def label(self) -> str:
        return f"{self.repo}:{self.path}@{self.commit[:8]}"

    def url(self) -> str:
        base = os.environ.get(RECORD_URL_ENV) or DEFAULT_RECORD_URL
        return f"{base.rstrip('/')}/{self.repo}/{self.commit}/{self.path}"


def _form(value: object) -> str:
    return "shipped" if isinstance(value, str) else "record"


# A case field: the name of a shipped text, or a pinned file of the public record (a table); an
# error names the form it was read as: case.text.record.sha256, case.text.shipped.
TextReference = Annotated[Union[Annotated[str, Field(min_length=1), Tag("shipped")],  # noqa: UP007
                                Annotated[RecordText, Tag("record")]], Discriminator(_form)]


def text_label(ref: TextReference) -> str:
    """How a record names a case text: a shipped text's name, or repo@commit:path of a record file."""
    return ref if isinstance(ref, str) else ref.label()


def cached_text_path(ref: RecordText) -> Path:
    return cache_root() / "texts" / f"{ref.sha256[:16]}-{Path(ref.path).name}"


def resolve_text(ref: TextReference, *, fetch: bool = True, timeout_s: float = FETCH_TIMEOUT_S) -> Path:
    """The file of a text reference on this machine.

    :raises LawbenchError: a shipped name lawbench does not ship (the caller names the field).
    :raises NotApplicable: a record text not in the cache that could not be fetched (a SKIP; a
        FAIL on its own runner), naming the text, the address and why.
    :raises EngineError: a record text whose bytes are not the pinned ones (cached or fetched).
    """
    if isinstance(ref, str):
        from lawbench.core.engines.perplexity import shipped_text

        return shipped_text(ref)
    path = cached_text_path(ref)
    if path.is_file():
        got = sha256_of(path)
        if got == ref.sha256:
            return path
        aside = path.with_name(path.name + f".bad-{got[:12]}")
        path.rename(aside)
        raise EngineError(f"text {ref.label()}: the cached copy's SHA-256 is {got}, not the pinned "
                          f"{ref.sha256}; set aside as {aside}, run again to fetch it anew")
    if not fetch:
        raise NotApplicable(f"text {ref.label()} is not in the cache ({path}) and this call fetches nothing")
    url = ref.url()
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            body = resp.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise NotApplicable(f"text {ref.label()} is not in the cache ({path}) and could not be fetched "
                            f"from {url}: {getattr(exc, 'reason', exc)} (a runner with the network fetches "
                            f"it once; ${RECORD_URL_ENV} names another address)") from None
    got = hashlib.sha256(body).hexdigest()
    if got != ref.sha256:
        raise EngineError(f"text {ref.label()}: fetched {len(body)} bytes from {url} whose SHA-256 is "
                          f"{got}, not the pinned {ref.sha256}; nothing was kept")
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + f".part{os.getpid()}")
    part.write_bytes(body)
    os.replace(part, path)
    return path


def check_text_ref(ref: TextReference) -> None:
    """What `lawbench check` can say without the network: a shipped name must be shipped.

    :raises LawbenchError: naming the shipped texts."""
    if isinstance(ref, str):
        from lawbench.core.engines.perplexity import shipped_text

        shipped_text(ref)


__all__ = [
    "RECORD_URL_ENV",
    "LawbenchError",
    "RecordText",
    "TextReference",
    "cached_text_path",
    "check_text_ref",
    "resolve_text",
    "text_label",
]
