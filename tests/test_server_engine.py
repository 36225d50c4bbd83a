"""llama-server as an instrument (lawbench.core.engines.server) and the speculative Law 4 path
(plugins/law4/speculative.py), against the real cached b11434 build on a tiny synthetic model.

The server must always be gone afterwards — after success, a bad model path, a load timeout and a
request timeout — so every test that starts one checks that no llama-server of ours is left.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest
from _engine_fixtures import *

from lawbench.core.engines.server import Request, Speculation, serve, server_command
from lawbench.core.errors import DataError, EngineError
from lawbench.core.store.synthetic import SyntheticSpec, build_synthetic

DATA = Path(__file__).parent / "data" / "server"
RECORDED = DATA / "completion_ngram_copy.json"


def _our_servers() -> list[psutil.Process]:
    """llama-server processes that are children of this test process (never anyone else's)."""
    me = psutil.Process(os.getpid())
    out = []
    for p in me.children(recursive=True):
        try:  # a zombie (ended, not yet reaped) has no command line to read and runs nothing
            if "llama-server" in " ".join(p.cmdline() or []):
                out.append(p)
        except psutil.Error:
            continue
    return out


def _servers_started_here(binary: Path) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["exe", "cmdline", "status"]):
        try:
            if p.info["exe"] == str(binary) and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


# The shipped prompts are ~900 tokens in the synthetic vocabulary: a 4k training context holds them.
TINY_4K = SyntheticSpec(id="tiny-4k", n_layer=2, n_embd=256, n_ff=512, n_head=4, n_head_kv=2,
                        n_vocab=512, context_length=4096)
# Random weights decode greedily into tight loops ("LLLL…", "D 7D 7…"). ngram-simple copies what
# follows the NEAREST earlier match of the last n tokens and drops a copy shorter than n, so on a
# loop whose period is below n it never drafts; n = 1 drafts on any loop (measured here: n 4 m 64
# drafted 0 tokens, n 1 m 8 drafted 61 of 128). Real text repeats in long spans, where n = 4 works.
NGRAM_ON_SYNTHETIC = Speculation(type="ngram-simple", ngram_size_n=1, ngram_size_m=8)


@pytest.fixture(scope="session")
def tiny_4k(synth_dir) -> Path:
    return build_synthetic(TINY_4K, cache_dir=synth_dir)


@pytest.fixture
def no_leftover(llama):
    binary = llama.bin_dir / "llama-server"
    before = {p.pid for p in _servers_started_here(binary)}
    yield
    left = [p for p in _servers_started_here(binary) if p.pid not in before]
    assert not left, f"llama-server left running: {[p.pid for p in left]}"
    assert not _our_servers()


# --------------------------------------------------------------------------- the runner, for real

def test_plain_request_returns_timings(llama, tiny_4k, no_leftover):
    from lawbench.plugins.law4.prompts import NOVEL

    run = serve(llama, tiny_4k, [Request(NOVEL, n_predict=24, ignore_eos=True)], ctx=2048, threads=2)
    t = run.timings[0]
    assert t["predicted_n"] == 24
    assert t["predicted_per_second"] > 0
    assert "draft_n" not in t  # no speculation: the server reports no drafts
    assert "--host" in run.cmd and run.cmd[run.cmd.index("--host") + 1] == "127.0.0.1"


def test_ngram_speculation_drafts_on_copy_prompt(llama, tiny_4k, no_leftover):
    """On a prompt that holds the text to repeat, an n-gram drafter finds spans and drafts; the
    response is recorded for the parser test below (tests/data/server/)."""
    from lawbench.plugins.law4.prompts import COPY

    run = serve(llama, tiny_4k, [Request(COPY, n_predict=128, ignore_eos=True)], ctx=2048, threads=2,
                spec=NGRAM_ON_SYNTHETIC)
    t = run.timings[0]
    assert t["predicted_n"] == 128
    assert t.get("draft_n", 0) > 0, f"ngram-simple drafted nothing: {t}"
    assert 0 <= t["draft_n_accepted"] <= t["draft_n"]
    if os.environ.get("LAWBENCH_RECORD_SERVER"):  # re-record: LAWBENCH_RECORD_SERVER=1 pytest …
        DATA.mkdir(parents=True, exist_ok=True)
        RECORDED.write_text(json.dumps(run.responses[0], indent=1) + "\n", encoding="utf-8")
        (DATA / "completion_ngram_copy.json.cmd").write_text(" ".join(run.cmd) + "\n", encoding="utf-8")


def test_bad_model_path_is_engine_error_and_server_stopped(llama, tmp_path, no_leftover):
    missing = tmp_path / "no-such-model.gguf"
    with pytest.raises(EngineError) as err:
        serve(llama, missing, [Request("hello", n_predict=4)], load_timeout_s=60)
    msg = str(err.value)
    assert "llama-server" in msg and str(missing) in msg  # names the command


def test_load_timeout_kills_server(llama, tiny_f16, no_leftover, monkeypatch):
    # /health never answers (as for a model that takes forever to load): the real server process
    # must be ended when the load deadline passes. Without the stub, a loaded box could see the
    # tiny model healthy at the first look, however short the deadline.
    from lawbench.core.engines import server as server_module

    def never_listening(*args, **kwargs):
        raise OSError("connection refused")

    monkeypatch.setattr(server_module, "_get", never_listening)
    with pytest.raises(EngineError, match="did not finish loading the model within"):
        serve(llama, tiny_f16, [Request("hello", n_predict=4)], load_timeout_s=0.5)


def test_request_timeout_kills_server(llama, tiny_4k, no_leftover):
    # ~3000 tok/s here: 3500 tokens take over a second, far past 0.1 s; the request times out mid-decode
    with pytest.raises(EngineError, match="did not finish answering request 1 of 1 within 0.1 s"):
        serve(llama, tiny_4k, [Request("hello", n_predict=3500, ignore_eos=True, timeout_s=0.1)], ctx=4096)


def test_server_command_spells_speculation(llama, tiny_f16):
    spec = Speculation(type="draft-simple", draft_model=Path("/m/draft.gguf"), draft_max=2, draft_gpu_layers=0)
    cmd = server_command(llama, tiny_f16, 8080, spec=spec)
    assert cmd[cmd.index("--spec-type") + 1] == "draft-simple"
    assert cmd[cmd.index("-md") + 1] == "/m/draft.gguf"
    assert cmd[cmd.index("--spec-draft-n-max") + 1] == "2" and cmd[cmd.index("-ngld") + 1] == "0"
    ngram = server_command(llama, tiny_f16, 8080, spec=Speculation(type="ngram-simple", ngram_size_m=384,
                                                                    ngram_size_n=4))
    assert ngram[ngram.index("--spec-ngram-simple-size-m") + 1] == "384"
    assert ngram[ngram.index("--spec-ngram-simple-size-n") + 1] == "4"
    assert "--spec-type" not in server_command(llama, tiny_f16, 8080, spec=Speculation())


def test_every_spec_type_is_known_to_the_build(llama):
    """The names SpecTable accepts are the pinned build's own (--spec-type in llama-server --help)."""
    import subprocess

    from lawbench.plugins.law4.server_case import SPEC_TYPES

    from lawbench.core.engines.server import server_binary  # compiled on first need (engines.tools)

    out = subprocess.run([str(server_binary(llama)), "--help"], capture_output=True, text=True, check=False,
                         timeout=60, encoding="utf-8").stdout
    line = next(ln for ln in out.splitlines() if "--spec-type" in ln)
    for name in SPEC_TYPES:
        assert name in line, f"{name} not in {line!r}"


# --------------------------------------------------------------------------- the recorded response

def test_recorded_response_parses():
    """A response the real server returned (recorded by the test above): the fields a visit reads."""
    resp = json.loads(RECORDED.read_text(encoding="utf-8"))
    t = resp["timings"]
    assert t["predicted_per_second"] > 0 and t["predicted_n"] == 128
    assert t["draft_n"] > 0 and 0 <= t["draft_n_accepted"] <= t["draft_n"]
    assert isinstance(resp["content"], str)


# --------------------------------------------------------------------------- the case and the sampler

def _server_anchor(kind="ratio", **over):
    from lawbench.core.models import Anchor

    raw = {"id": "test.server", "law": "law4", "claim": "c", "quantity": "decode_ratio", "unit": "x",
           "kind": kind, "value": 1.0, "band": {"rel": 0.5}, "claims": ["x"],
           "case": {"quantity": "decode_tok_s", "model": "path:/nope.gguf",
                    "bench": {"tool": "server", "n_gen": 16, "reps": 1,
                              "server": {"prompt": "copy"}}},
           "arms": {"a": {"bench": {"server": {"spec": {"type": "ngram-simple", "ngram_size_n": 1,
                                                        "ngram_size_m": 8}}}},
                    "b": {}},
           "provenance": {"seed": "s", "quote": "q", "band_rationale": "r"}}
    raw.update(over)
    return Anchor.model_validate(raw)


def test_spec_table_refuses_flags_its_type_does_not_read():
    from pydantic import ValidationError

    from lawbench.plugins.law4.server_case import SpecTable

    with pytest.raises(ValidationError, match="draft_model"):
        SpecTable(type="draft-simple")
    with pytest.raises(ValidationError, match="ngram_size_m"):
        SpecTable(type="ngram-mod", ngram_size_m=8)
    with pytest.raises(ValidationError, match="draft_max"):
        SpecTable(type="ngram-simple", draft_max=3)
    with pytest.raises(ValidationError):
        SpecTable(type="ngram-fancy")


def test_server_ratio_anchor_interleaves_real_visits(llama, tiny_4k, no_leftover):
    """The whole path on the real binary: a ratio of ngram on over off, arms A B B A."""
    from lawbench.plugins.law4.law import Law4
    from lawbench.plugins.law4.measure import arm_cases

    sampler = Law4().sampler  # the law sends a server case to llama-server
    anchor = _server_anchor(case={"quantity": "decode_tok_s", "model": f"path:{tiny_4k}",
                                  "bench": {"tool": "server", "n_gen": 48, "reps": 1, "threads": 2,
                                            "server": {"prompt": "copy", "ignore_eos": True, "ctx": 2048}}})

    class R:
        def llama(self):
            return llama

    from lawbench.core.hardware.profiles import load_profiles

    profile = load_profiles()["cpu"]
    s = sampler(anchor, profile, R())
    samples = s.draw(2)
    assert len(samples) == 2 and all(x.value > 0 for x in samples)
    assert [v["arm"] for v in s.visits if not v["discarded"]] == ["a", "b", "b", "a"]
    proto = s.protocol()
    assert proto["engine"] == "llama-server"
    raw_a = samples[0].raw["raw_a"]
    assert raw_a["spec"] == "ngram-simple" and raw_a["requests"][0]["draft_n"] > 0
    assert samples[0].raw["raw_b"]["spec"] == "none"
    assert set(arm_cases(anchor)) == {"a", "b"}


def test_agreement_on_server_case_is_refused():
    from lawbench.plugins.law4.law import Law4
    from lawbench.plugins.law4.measure import arm_cases

    sampler = Law4().sampler
    anchor = _server_anchor(kind="agreement")
    arm_cases(anchor)  # the case itself is valid
    with pytest.raises(DataError, match="no speculation term"):
        sampler(anchor, None, None)


# --------------------------------------------------------------------------- the anchors

def test_speculation_anchors_skip_off_their_runner():
    """Each gtx1060 speculation anchor binds to gtx1060 only, runs in llama-server, and cites lines."""
    from importlib import resources as ir

    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.core.claims.loading import load_anchors

    files = [ir.files("lawbench.anchors.law4") / f for f in ("gtx1060.toml", "history.toml")]
    spec = [la.anchor for la in load_anchors(files, laws=["law4"], profiles=load_profiles()).anchors
            if ".spec." in la.anchor.id]
    assert spec, "no speculation anchors found"
    for a in spec:
        assert a.profiles == ["gtx1060"], a.id
        assert a.claims, a.id
        tables = [a.case.get("bench", {})] + [arm.get("bench", {}) for arm in (a.arms or {}).values()]
        assert a.case["bench"]["tool"] == "server", a.id
        assert all(t.get("tool", "server") == "server" for t in tables), a.id


# --------------------------------------------------------------------------- draft acceptance (L-13)

def _acceptance_anchor(model: str, **over):
    raw = {"kind": "measurement", "quantity": "draft_acceptance", "unit": "%", "value": 50.0,
           "band": {"lo": 0.0, "hi": 100.0}, "arms": {},
           "case": {"quantity": "draft_acceptance", "model": model,
                    "bench": {"tool": "server", "n_gen": 48, "reps": 2, "warmup": False, "threads": 2,
                              "server": {"prompt": "copy", "ignore_eos": True, "ctx": 2048,
                                         "spec": {"type": "ngram-simple", "ngram_size_n": 1,
                                                  "ngram_size_m": 8}}}},
           "budget": {"min_samples": 3, "max_samples": 3, "batch": 3, "timeout_s": 300}}
    raw.update(over)
    return _server_anchor(**raw)


@pytest.fixture(scope="session")
def tiny_4k_q2k(llama, synth_dir) -> Path:
    """The same random weights as tiny_4k at Q2_K: a draft model that agrees with its target only
    part of the time (measured here: 36 of 105 drafts accepted at n-max 4; at Q8_0 every one)."""
    from lawbench.core.engines.bench import quantize

    return build_synthetic(TINY_4K.model_copy(update={"weight_type": "Q2_K"}), cache_dir=synth_dir,
                           quantize=lambda src, dst, t: quantize(llama, src, dst, t, timeout_s=300))


def test_draft_acceptance_is_the_engines_own_count_on_a_real_server(llama, tiny_4k, tiny_4k_q2k, no_leftover):
    """A measurement anchor of draft_acceptance run whole on the real binary, a Q2_K copy of the
    target drafting: every reading is one timed request's draft_n_accepted / draft_n (in %), a
    visit's value their median, the statistic their mean (a rate is averaged, not multiplied)."""
    import statistics

    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.core.models import Verdict
    from lawbench.plugins.law4.law import Law4
    from lawbench.testing import evaluate_anchor

    class R:
        def llama(self):
            return llama

    case = _acceptance_anchor(f"path:{tiny_4k}").case
    case["bench"]["server"].update(prompt="novel", spec={"type": "draft-simple", "draft_model": f"path:{tiny_4k_q2k}",
                                                         "draft_max": 4})
    anchor = _acceptance_anchor(f"path:{tiny_4k}", case=case)
    r = evaluate_anchor(anchor, Law4(), profile=load_profiles()["cpu"], resources=R())
    assert r.verdict is Verdict.PASS, r.reason
    assert len(r.measurement.samples) == 3
    for s in r.measurement.samples:
        reqs = s.raw["requests"]
        assert len(reqs) == 2 and all(q["draft_n"] > 0 for q in reqs)
        want = [100.0 * q["draft_n_accepted"] / q["draft_n"] for q in reqs]
        assert s.raw["reps"] == pytest.approx(want) and s.value == pytest.approx(statistics.median(want))
        assert all(0.0 < v < 100.0 for v in want)  # the draft is right only part of the time
    assert r.measured == pytest.approx(statistics.fmean(s.value for s in r.measurement.samples))
    assert r.statistic.startswith("mean of draft_acceptance")
    assert r.measurement.protocol["reading"].startswith("timings.draft_n_accepted / timings.draft_n")


def test_a_request_that_drafted_nothing_has_no_acceptance():
    from lawbench.plugins.law4 import speculative
    from lawbench.plugins.law4.case import parse_case

    t = json.loads(RECORDED.read_text(encoding="utf-8"))["timings"]  # a real response: 128 tokens, some drafted
    assert speculative.acceptance([t], 0.01) == [pytest.approx(100 * t["draft_n_accepted"] / t["draft_n"])]
    undrafted = {"predicted_per_second": 30.0, "draft_n": 0, "draft_n_accepted": 0}
    assert speculative.acceptance([undrafted, {"predicted_per_second": 30.0}]) == []
    case = parse_case(_acceptance_anchor("path:/m.gguf").case, "t")
    with pytest.raises(EngineError, match="undefined"):
        speculative._readings(case, [undrafted], 0.01, Path("/m.gguf"))


@pytest.mark.parametrize("over,field", [
    ({"kind": "prediction"}, "kind"),
    ({"kind": "ratio", "quantity": "decode_ratio", "unit": "x",
      "arms": {"a": {}, "b": {"bench": {"server": {"spec": {"ngram_size_m": 16}}}}}}, "kind"),
    ({"case": {"quantity": "draft_acceptance", "model": "path:/m.gguf",
               "bench": {"tool": "server", "n_gen": 8, "server": {"prompt": "copy"}}}}, "case.bench.server.spec.type"),
    ({"case": {"quantity": "draft_acceptance", "model": "path:/m.gguf", "bench": {"n_gen": 8}}},
     "case.bench.server.spec.type"),
])
def test_draft_acceptance_only_where_a_drafter_runs_and_nothing_prices_it(over, field):
    from lawbench.plugins.law4.law import Law4

    with pytest.raises(DataError) as err:
        Law4().check_anchor(_acceptance_anchor("path:/m.gguf", **over))
    assert err.value.field == field, err.value
