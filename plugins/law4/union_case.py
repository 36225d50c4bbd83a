"""The `union` table of a Law 4 expert-union anchor: how the verify batches are formed
(plugins/law4/union.py). A model only, so case.py holds it without importing the sampler.

    union = { draft_tokens = 3 }                                   a K = 3 draft: batches of 4 tokens
    union = { draft_tokens = 0, text = "python-reference-3.11.txt", chars = 6000 }
"""
from __future__ import annotations

from typing import Optional

from pydantic import Field

from lawbench import Strict
from lawbench.engines import DEFAULT_TEXT, TextReference


class UnionCase(Strict):
    """A text decoded in verify batches of ``draft_tokens + 1`` tokens (K drafted, plus the one the
    target always adds), every token asking for logits as verification does."""

    draft_tokens: int = Field(ge=0, le=1024)  # K; 0 is plain one-token decode
    text: TextReference = DEFAULT_TEXT  # a shipped text, or a pinned file of the public record
    chars: int = Field(default=8000, gt=0)  # the leading characters of the text that are decoded
    threads: Optional[int] = Field(default=None, ge=1, le=4096)  # default: the profile's engine threads
    timeout_s: float = Field(default=600.0, gt=0)

    @property
    def batch_tokens(self) -> int:
        return self.draft_tokens + 1
