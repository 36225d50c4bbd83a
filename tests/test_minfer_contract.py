"""The lawbench minfer contract (docs/minfer-contract.md): the stand-in speaks it exactly, lawbench's
own parsers read it, the strict checker can tell a broken speaker, and the page quotes seed 002
verbatim and names what the code names (version, labels, faults)."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Iterable

import pytest
import standin
from test_minfer import anchors, engine, run  # noqa: F401 (fixtures)

from lawbench.core.errors import EngineError
from lawbench.core.models import Verdict
from lawbench.plugins.minfer import engine as minfer_engine
from lawbench.plugins.minfer.contract import (CONTRACT_KEY, CONTRACT_VERSION, GREEDY_KEY, PREFILL_KEY, check_version,
                                              greedy, json_objects, stated_version)
from lawbench.plugins.minfer.engine import EngineRun, engine_revision, prefill_tok_s
from lawbench.plugins.minfer.labels import STATES, count_labels, labels_in_line
from lawbench.plugins.minfer.revisions import PROBE_KEY, parse_probe, revision_number

# The contract, strictly: what a conforming engine may print. lawbench itself reads only the keys it
# needs (a real engine may print other text); the stand-in engine must print nothing else.
PASS_KEYS = (PREFILL_KEY, GREEDY_KEY)  # what a pass may print on stdout
PROBE_KEYS = (PROBE_KEY, CONTRACT_KEY)  # what the revision probe may print on stdout


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


ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "minfer-contract.md"
SEED = ROOT / "sources" / "seeds" / "002_73bfd6a23252a67a.txt"


def standin_run(probe: bool = False, debug: bool = True, **env: str) -> EngineRun:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MINFER_", "LAWBENCH_MINFER"))}
    if probe:
        e["LAWBENCH_MINFER_PROBE"] = "revision"
    if debug:
        e["MINFER_MMQ_RAW_NB_DEBUG"] = "1"
    e.update(env)
    p = subprocess.run(standin.argv(), env=e, capture_output=True, text=True, timeout=60, encoding="utf-8")
    return EngineRun(standin.argv(), p.returncode, p.stdout, p.stderr, 0.0)


# ------------------------------------------------------------------ the stand-in speaks it

@pytest.mark.parametrize("env", [{}, {"MINFER_MMQ_Q6K_EXP": "0"}, {"MINFER_MMQ_Q6K_NB": "0"},
                                 {"MINFER_STANDIN_FAULT": "wrong-map-key"}, {"MINFER_STANDIN_FAULT": "alloc-fail"},
                                 {"MINFER_STANDIN_FAULT": "exp-ignored"}, {"MINFER_STANDIN_FAULT": "unpadded"},
                                 {"MINFER_STANDIN_FAULT": "bad-math"}])
def test_a_pass_conforms_and_lawbench_reads_it(env):
    r = standin_run(**env)
    assert r.returncode == 0, r.stderr
    assert conformance_problems(r.stdout, r.stderr, probe=False, debug=True) == []
    assert prefill_tok_s(r) in (3181.0, 3020.7)
    assert greedy(r.stdout)["greedy_tokens"] == 27
    counts = count_labels(r.stderr)
    launches = 0 if env.get("MINFER_MMQ_Q6K_NB") == "0" else 27  # NB off: no launch through the kernel
    assert sum(counts.values()) == launches and set(counts) == set(STATES)
    # one label per launch line, none elsewhere
    assert sum(1 for line in r.stderr.splitlines() if "[mmq_raw_nb]" in line) == launches


def test_without_the_debug_variable_a_pass_prints_no_label():
    r = standin_run(debug=False)
    assert r.returncode == 0 and sum(count_labels(r.stderr).values()) == 0
    assert conformance_problems(r.stdout, r.stderr, probe=False, debug=False) == []


def test_the_probe_conforms_states_the_version_and_runs_no_pass():
    r = standin_run(probe=True, MINFER_STANDIN_REVISION="r55")
    assert r.returncode == 0
    assert conformance_problems(r.stdout, r.stderr, probe=True, debug=True) == []
    assert parse_probe(r.stdout, "stand-in") == "r55"
    assert json_objects(r.stdout) == [{"minfer_revision": "r55", "minfer_contract": CONTRACT_VERSION}]
    assert check_version(r.stdout) == CONTRACT_VERSION == 1
    assert sum(count_labels(r.stderr).values()) == 0  # no launch ran


def test_the_output_does_not_depend_on_the_path():
    """Both B paths compute the same int8 values (seed 002 §2.3): the greedy digest is one."""
    digests = {greedy(standin_run(**env).stdout)["greedy_sha256"]
               for env in ({}, {"MINFER_MMQ_Q6K_EXP": "0"}, {"MINFER_STANDIN_FAULT": "wrong-map-key"},
                           {"MINFER_STANDIN_FAULT": "unpadded"})}
    assert len(digests) == 1
    assert greedy(standin_run(MINFER_STANDIN_FAULT="bad-math").stdout)["greedy_sha256"] not in digests


# ------------------------------------------------------------------ the checker can fail

@pytest.mark.parametrize("stdout,stderr,probe,words", [
    ('progress 50%\n{"prefill_tok_s": 3181.0}\n', "", False, "not one JSON object"),
    ('{"prefill_tok_s": 3181.0, "tok_s": 1}\n', "", False, "tok_s are not the contract's"),
    ('{"greedy_tokens": [1, 2]}\n', "", False, "no prefill_tok_s"),
    ('{"prefill_tok_s": 3181.0}\n{"greedy_tokens": [1, -2]}\n', "", False, "not a list of token ids"),
    ('{"prefill_tok_s": 3181.0}\n', "B=W_exp-cp.async B=W_exp-cp.async\n", False, "carries 2 labels"),
    ('{"minfer_revision": "r54"}\n', "", True, "does not state minfer_contract"),
    ('{"minfer_revision": "r54", "minfer_contract": 2}\n', "", True, "speaks lawbench minfer contract version 2"),
    ('{"minfer_revision": "54", "minfer_contract": 1}\n', "", True, "no minfer_revision of the form r<N>"),
    ('{"minfer_revision": "r54", "minfer_contract": 1}\n', "B=W_exp-cp.async\n", True, "outside a"),
])
def test_the_strict_checker_names_what_breaks_the_contract(stdout, stderr, probe, words):
    problems = conformance_problems(stdout, stderr, probe=probe, debug=True)
    assert any(words in p for p in problems), problems


def test_a_command_speaking_another_version_is_refused_never_guessed(engine, anchors):
    engine("future-contract")
    with pytest.raises(EngineError, match="speaks lawbench minfer contract version 2; this lawbench speaks version 1"):
        engine_revision(standin.argv(), dict(os.environ), "stand-in")
    r = run(anchors["minfer.r54.census.default"])
    assert r.verdict is Verdict.ERROR and "contract version 2" in r.reason
    assert check_version('{"minfer_revision": "r54"}') == 1  # stated by no key: the contract as first written


def test_the_census_record_keeps_the_greedy_digest(engine, anchors):
    engine()
    r = run(anchors["minfer.r54.census.default"])
    assert r.verdict is Verdict.PASS, r.reason
    assert r.measurement.environment["greedy_tokens"] == 27
    assert re.fullmatch(r"[0-9a-f]{64}", r.measurement.environment["greedy_sha256"])


# ------------------------------------------------------------------ the page

def _norm(text: str) -> str:
    return " ".join(text.split())


def test_every_quotation_on_the_page_is_verbatim_in_seed_002():
    doc, seed = DOC.read_text(encoding="utf-8"), _norm(SEED.read_text(encoding="utf-8"))
    quotes = [_norm(" ".join(line[2:] for line in block.splitlines()))
              for block in re.findall(r"(?m)(?:^> .*\n?)+", doc)]
    blocks = [_norm(b) for b in re.findall(r"```seed002\n(.*?)```", doc, re.S)]
    assert len(quotes) >= 8 and len(blocks) == 1
    for q in quotes + blocks:
        assert q in seed, q


def test_the_page_names_the_version_the_labels_and_the_faults_the_code_has():
    doc = DOC.read_text(encoding="utf-8")
    assert doc.startswith(f"# The lawbench minfer contract, version {CONTRACT_VERSION}\n")
    section = doc[doc.index("### 3.1"):doc.index("### 3.2")]
    table_labels = re.findall(r"^\| `([^`]+)` \|", section, re.M)
    assert table_labels == list(STATES)
    section = doc[doc.index("## 6. The stand-in"):doc.index("## 7.")]
    table = [line for line in section.splitlines() if line.startswith("| `")]
    named = {name for line in table for name in re.findall(r"`([a-z-]+)`", line.split(" | ")[0])}
    assert named == set(standin.faults())  # every planted fault documented, and nothing else


def test_the_engine_module_points_at_the_page_instead_of_repeating_it():
    doc = minfer_engine.__doc__
    assert "docs/minfer-contract.md" in doc and "MINFER_MMQ_RAW_NB_DEBUG" not in doc
