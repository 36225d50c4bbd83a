"""The lawbench minfer contract as lawbench reads it: its version, its stdout keys, and a strict
conformance check. The contract itself, for engine authors: docs/minfer-contract.md.

lawbench speaks CONTRACT_VERSION. A command may state the version it speaks on the revision probe
({"minfer_revision": "r54", "minfer_contract": 1}); one that states another version is refused
(an ERROR naming both), never read on a guess. A command that states none is read as version 1,
the contract as first written (before the key existed).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, Optional

from lawbench import EngineError
from lawbench.plugins.minfer.labels import labels_in_line
from lawbench.plugins.minfer.revisions import PROBE_KEY, revision_number

CONTRACT_VERSION = 1
CONTRACT_KEY = "minfer_contract"
CONTRACT_DOC = "docs/minfer-contract.md"
DEBUG_ENV = {"MINFER_MMQ_RAW_NB_DEBUG": "1"}  # lawbench sets it for a census: one label line per launch
PREFILL_KEY = "prefill_tok_s"
GREEDY_KEY = "greedy_tokens"
PASS_KEYS = (PREFILL_KEY, GREEDY_KEY)  # what a pass may print on stdout
PROBE_KEYS = (PROBE_KEY, CONTRACT_KEY)  # what the revision probe may print on stdout


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


def conformance_problems(stdout: str, stderr: str, probe: bool, debug: bool) -> list[str]:
    """Everything a command's output does that contract version 1 does not allow, strictly: a
    real engine may print other text on stdout (lawbench ignores it), a strict speaker does not.

    :param probe: the output is the revision probe's (else a whole-prefill pass's)
    :param debug: the pass ran with MINFER_MMQ_RAW_NB_DEBUG=1 (label lines allowed on stderr)
    """
    problems = []
    allowed = PROBE_KEYS if probe else PASS_KEYS
    objects = json_objects(stdout)
    lines = [line for line in stdout.splitlines() if line.strip()]
    if len(objects) != len(lines):
        problems.append(f"stdout has {len(lines) - len(objects)} line(s) that are not one JSON object")
    for obj in objects:
        extra = sorted(set(obj) - set(allowed))
        if extra:
            problems.append(f"stdout key(s) {', '.join(extra)} are not the contract's (allowed: {', '.join(allowed)})")
    values = {k: v for obj in objects for k, v in obj.items()}
    if probe:
        try:
            revision_number(values.get(PROBE_KEY))
        except ValueError:
            problems.append(f"the probe printed no {PROBE_KEY} of the form r<N> (got {values.get(PROBE_KEY)!r})")
        if stated_version(stdout) is None:  # lawbench reads its absence as 1; a strict speaker states it
            problems.append(f"the probe does not state {CONTRACT_KEY}")
        try:
            check_version(stdout)
        except EngineError as exc:
            problems.append(str(exc))
    else:
        rate = values.get(PREFILL_KEY)
        if not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0):
            problems.append(f"the pass printed no {PREFILL_KEY} > 0 (got {rate!r})")
        try:
            greedy(stdout)
        except EngineError as exc:
            problems.append(str(exc))
    problems += _label_problems(stderr.splitlines(), labels_allowed=debug and not probe)
    return problems


def _label_problems(lines: Iterable[str], labels_allowed: bool) -> list[str]:
    problems = []
    for n, line in enumerate(lines, 1):
        found = labels_in_line(line)
        if found and not labels_allowed:
            problems.append(f"stderr line {n} carries a B-path label outside a MINFER_MMQ_RAW_NB_DEBUG=1 pass: "
                            f"{line!r}")
        elif len(found) > 1:
            problems.append(f"stderr line {n} carries {len(found)} labels, not one per launch line: {line!r}")
    return problems
