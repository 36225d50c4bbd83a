"""The case tables of a llama-server visit (bench.tool = "server"): the prompt, the context and the
speculation (--spec-type and only the flags that type reads). Models only, so that case.py can hold
them without importing the sampler that runs them (plugins/law4/speculative.py)."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, model_validator

from lawbench import Strict

# --spec-type names of llama.cpp b11434 (common/speculative.cpp: common_speculative_type_from_name_map).
SPEC_TYPES = ("none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
              "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
_NGRAM_SIZED = ("ngram-simple", "ngram-map-k", "ngram-map-k4v")  # those with --spec-ngram-<kind>-size-n/m
_MODEL_DRAFTS = ("draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark")  # need -md


class SpecTable(Strict):
    """One arm's speculation: a --spec-type and only the flags that type reads."""

    type: Literal[SPEC_TYPES] = "none"  # type: ignore[valid-type]
    draft_model: Optional[str] = Field(default=None, pattern=r"^(path|gguf):.+")  # -md
    draft_max: Optional[int] = Field(default=None, ge=0)  # --spec-draft-n-max (K, tokens per draft)
    draft_min: Optional[int] = Field(default=None, ge=0)  # --spec-draft-n-min
    draft_gpu_layers: Optional[int] = Field(default=None, ge=0)  # -ngld (0: the draft on the CPU)
    ngram_size_n: Optional[int] = Field(default=None, ge=1, le=1024)  # lookup length
    ngram_size_m: Optional[int] = Field(default=None, ge=1, le=1024)  # draft length (budget)

    @model_validator(mode="after")
    def _flags_fit_type(self) -> "SpecTable":
        if self.type in _MODEL_DRAFTS and self.draft_model is None:
            raise ValueError(f"spec.type {self.type!r} drafts with a model: give spec.draft_model")
        if self.draft_model is not None and self.type not in _MODEL_DRAFTS:
            raise ValueError(f"spec.draft_model is read by a model drafter ({', '.join(_MODEL_DRAFTS)}), "
                             f"not by {self.type!r}")
        drafting = self.type.startswith("draft-")
        for name in ("draft_max", "draft_min", "draft_gpu_layers"):
            if getattr(self, name) is not None and not drafting:
                raise ValueError(f"spec.{name} is read by a draft-* type, not by {self.type!r}")
        for name in ("ngram_size_n", "ngram_size_m"):
            if getattr(self, name) is not None and self.type not in _NGRAM_SIZED:
                raise ValueError(f"spec.{name} is read by {', '.join(_NGRAM_SIZED)}, not by {self.type!r}")
        return self


class ServerOptions(Strict):
    """How llama-server runs a case (bench.server): the prompt, the context, the speculation.

    ``prompt = "document"`` sends one request per entry of ``questions``, in order, on one server:
    the same document (the first ``document_chars`` characters of the shipped text) and that
    question (plugins/law4/prompts.py); with ``cache_prompt`` the server keeps each request's KV
    for the next (register V-10: 'Request 1 with `cache_prompt: true` (cold). Request 2: same
    document, DIFFERENT question')."""

    prompt: Literal["novel", "copy", "document"]  # plugins/law4/prompts.py
    questions: list[Literal["a", "b", "c"]] = Field(default_factory=list)  # prompt "document": the requests
    document_chars: Optional[int] = Field(default=None, ge=200)  # prompt "document": its length
    cache_prompt: bool = False  # keep each request's KV for the next request of the same server
    ctx: int = Field(default=4096, ge=256)  # -c: prompt + n_gen must fit
    ignore_eos: bool = False  # true: always n_gen tokens (a model that stops early times fewer)
    load_timeout_s: float = Field(default=300.0, gt=0)  # until /health answers ok
    spec: SpecTable = Field(default_factory=SpecTable)

    @model_validator(mode="after")
    def _document_fields(self) -> "ServerOptions":
        document = self.prompt == "document"
        if document != bool(self.questions) or document != (self.document_chars is not None):
            raise ValueError("prompt \"document\" asks its questions of a document of document_chars "
                             "characters: give prompt = \"document\", questions and document_chars together, "
                             "or none of them")
        return self
