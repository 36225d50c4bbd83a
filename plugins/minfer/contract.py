"""The lawbench minfer contract as lawbench reads it: its version and its stdout keys. The contract
itself, for engine authors: docs/minfer-contract.md; its strict conformance check, which the
stand-in engine passes: tests/test_minfer_contract.py.

lawbench speaks CONTRACT_VERSION. A command may state the version it speaks on the revision probe
({"minfer_revision": "r54", "minfer_contract": 1}); one that states another version is refused
(an ERROR naming both), never read on a guess. A command that states none is read as version 1,
the contract as first written (before the key existed).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Optional

from lawbench import EngineError

CONTRACT_VERSION = 1
CONTRACT_KEY = "minfer_contract"
CONTRACT_DOC = "docs/minfer-contract.md"
DEBUG_ENV = {"MINFER_MMQ_RAW_NB_DEBUG": "1"}  # lawbench sets it for a census: one label line per launch
PREFILL_KEY = "prefill_tok_s"
GREEDY_KEY = "greedy_tokens"


def json_objects(stdout: str) -> list[dict[str, Any]]:
    """Every stdout line that is one JSON object, in order; any other line is not the contract's."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def greedy(stdout: str, what: str = "minfer engine", log: str = "") -> dict[str, Any]:
    """The last greedy_tokens line as {"greedy_sha256", "greedy_tokens": its length}; {} when the
    command printed none (the key is optional). A malformed list breaks the contract: EngineError."""
    found: Optional[Any] = None
    for obj in json_objects(stdout):
        if GREEDY_KEY in obj:
            found = obj[GREEDY_KEY]
    if found is None:
        return {}
    if not (isinstance(found, list) and all(_whole(t) and t >= 0 for t in found)):
        raise EngineError(f'{what} printed {{"{GREEDY_KEY}": …}} that is not a list of token ids (whole numbers '
                          f">= 0); contract: {CONTRACT_DOC}", log=log)
    digest = hashlib.sha256(json.dumps(found, separators=(",", ":")).encode()).hexdigest()
    return {"greedy_sha256": digest, "greedy_tokens": len(found)}


def stated_version(stdout: str) -> Optional[Any]:
    """The minfer_contract value of the probe's output, or None when it states none."""
    found = None
    for obj in json_objects(stdout):
        if CONTRACT_KEY in obj:
            found = obj[CONTRACT_KEY]
    return found


def check_version(stdout: str, what: str = "minfer engine", log: str = "") -> int:
    """The contract version the probe states (1 when it states none); EngineError when it is not
    the version this lawbench speaks."""
    stated = stated_version(stdout)
    if stated is None:
        return CONTRACT_VERSION
    if stated != CONTRACT_VERSION or not _whole(stated):
        raise EngineError(f"{what} speaks lawbench minfer contract version {stated!r}; this lawbench speaks "
                          f"version {CONTRACT_VERSION} ({CONTRACT_DOC}): use a lawbench that speaks the "
                          "engine's version, or a wrapper that speaks this one", log=log)
    return stated
