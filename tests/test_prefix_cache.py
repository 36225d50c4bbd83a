"""Prefix caching across requests of one llama-server session (register V-10, prereg #29): the
quantity prefix_cache_speedup, the first request's timings.prompt_ms over the last's, each request
the same document with another question and cache_prompt on (plugins/law4/speculative.py).

The stand-in: the real cached b11434 llama-server on SmolLM2-135M (a real model, real text: the
shipped Python reference), on this box's CPU. The gtx1060 anchors run the register's flagship on
its split and SKIP here."""
from __future__ import annotations

import pytest
from _engine_fixtures import *  # noqa: F401,F403  (llama, smollm2)

from lawbench.core.errors import DataError, EngineError
from lawbench.core.models import Anchor, Verdict

V10 = "law4.gtx1060.prefix-cache.30b-flagship-split.second-question.v10"
V10_REPEAT = "law4.gtx1060.prefix-cache.30b-flagship-split.identical-repeat.v10"


def _anchor(model: str, questions=("a", "b"), cache_prompt=True, band=None, **bench) -> Anchor:
    b = {"tool": "server", "n_gen": 8, "reps": 1, "warmup": False, "threads": 2,
         "server": {"prompt": "document", "document_chars": 4000, "questions": list(questions),
                    "cache_prompt": cache_prompt, "ctx": 2048}}
    b.update(bench)
    return Anchor.model_validate({
        "id": "test.prefix-cache", "law": "law4", "claim": "c", "quantity": "prefix_cache_speedup", "unit": "x",
        "kind": "measurement", "value": 29.3, "band": band or {"lo": 5.0}, "claims": ["x"],
        "case": {"quantity": "prefix_cache_speedup", "model": model, "bench": b},
        "budget": {"min_samples": 3, "max_samples": 3, "batch": 3, "timeout_s": 300},
        "provenance": {"seed": "s", "quote": "q", "band_rationale": "r"}})


class _R:
    def __init__(self, llama):
        self._llama = llama

    def llama(self):
        return self._llama


def _evaluate(anchor, llama):
    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.plugins.law4.law import Law4
    from lawbench.testing import evaluate_anchor

    return evaluate_anchor(anchor, Law4(), profile=load_profiles()["cpu"], resources=_R(llama))


def test_a_second_question_processes_only_its_own_tokens_on_a_real_server(llama, smollm2):
    """Request 1 prefills the document (cold); request 2, the same document and another question,
    processes only the question: the server's own prompt_n and prompt_ms say so."""
    r = _evaluate(_anchor(f"path:{smollm2}"), llama)
    assert r.verdict is Verdict.PASS, r.reason
    for s in r.measurement.samples:
        first, last = s.raw["requests"]
        assert first["prompt_n"] > 500 and last["prompt_n"] < 40, s.raw
        assert s.value == pytest.approx(first["prompt_ms"] / last["prompt_ms"])
    assert r.measurement.protocol["reading"].startswith("timings.prompt_ms of the session's first request")


def test_without_cache_prompt_the_speedup_is_gone_and_the_anchor_is_red(llama, smollm2):
    """The planted fault: the same session with cache_prompt off re-processes the document on
    every request; the prereg's own 'at least 5x' turns red."""
    r = _evaluate(_anchor(f"path:{smollm2}", cache_prompt=False), llama)
    assert r.verdict is Verdict.FAIL, r.reason
    for s in r.measurement.samples:
        assert s.raw["requests"][1]["prompt_n"] > 500  # the whole document again
        assert s.value < 3.0


def test_an_identical_repeat_processes_about_one_token(llama, smollm2):
    """The session ends on a repeat of question c: the server processes about one token of it.
    (Its prompt time is ~13 ms on this shared 2-core box, so the ratio's own scatter is wide here;
    the server's token counts are what this stand-in checks.)"""
    r = _evaluate(_anchor(f"path:{smollm2}", questions=("a", "b", "c", "c"), band={"lo": 20.0}), llama)
    assert r.verdict is not Verdict.FAIL, r.reason
    for s in r.measurement.samples:
        n = [q["prompt_n"] for q in s.raw["requests"]]
        assert n[0] > 500 and max(n[1:3]) < 40 and n[3] <= 2, n


@pytest.mark.parametrize("over, field", [
    ({"warmup": True}, "bench.warmup"),  # a warm-up request would make request 1 warm
    ({"reps": 2}, "bench.warmup"),
    ({"server": {"prompt": "document", "document_chars": 4000, "questions": ["a"], "cache_prompt": True}},
     "bench.server.questions"),
    ({"server": {"prompt": "copy"}}, "bench.server.questions"),
])
def test_a_session_must_start_cold_and_ask_twice(over, field):
    from lawbench.plugins.law4.law import Law4

    with pytest.raises(DataError) as e:
        Law4().check_anchor(_anchor("path:/nope.gguf", **over))
    assert (e.value.field or "").endswith(field), e.value


def test_a_document_prompt_needs_its_questions_and_length():
    from pydantic import ValidationError

    from lawbench.plugins.law4.server_case import ServerOptions

    with pytest.raises(ValidationError, match="document_chars"):
        ServerOptions(prompt="document", questions=["a", "b"])
    with pytest.raises(ValidationError, match="questions"):
        ServerOptions(prompt="copy", questions=["a"])


def test_a_prompt_time_that_is_not_positive_is_an_engine_error():
    from lawbench.plugins.law4.speculative import prefix_speedup

    assert prefix_speedup([{"prompt_ms": 5380.8}, {"prompt_ms": 183.4}]) == pytest.approx(29.34, abs=0.01)
    with pytest.raises(EngineError, match="prompt_ms"):
        prefix_speedup([{"prompt_ms": 5380.8}, {"prompt_ms": 0}])


def test_the_v10_anchors_skip_off_their_runner():
    from lawbench.core.claims.loading import load_anchors
    from lawbench.plugins.law4.law import Law4

    found = {la.anchor.id: la.anchor for la in load_anchors(Law4().anchor_files(), laws=["law4"]).anchors}
    for aid, q in ((V10, ["a", "b"]), (V10_REPEAT, ["a", "b", "c", "c"])):
        a = found[aid]
        assert a.profiles == ["gtx1060"] and a.case["bench"]["server"]["questions"] == q
        Law4().check_anchor(a)
