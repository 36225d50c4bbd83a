"""The KV cache type as a case field of a perplexity ratio (plugins/law4/kv_quality.py): register
L-24's quality half of the q8_0 KV lever.

Unit tests: the llama-perplexity options each arm's case gives, the check-time guards (two arms at
one KV type cannot vary; both arms score one text at one depth), and the runner-bound anchor's SKIP
here / FAIL under --strict. The integration test measures the kind here, on the cpu profile, through
the real llama.cpp build on the real SmolLM2-135M and a shipped text, twice, and turns it red with a
band the measured ratio cannot meet.
"""
from __future__ import annotations

import pytest

from lawbench.core.errors import DataError
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.models import Verdict
from lawbench.plugins.law4.kv_quality import kv_cases, perplexity_args
from lawbench.plugins.law4.law import Law4
from lawbench.testing import evaluate_anchor, law_anchors, make_anchor

PROFILES = load_profiles()
L24 = "law4.gtx1060.ratio.l24-kv-q8_0-over-f16-ppl.30b-split-c7168"
CASE = {"quantity": "kv_ppl_ratio", "model": "gguf:smollm2-135m-q4_1",
        "perplexity": {"ctx": 128, "chunks": 2, "slice_chars": 3000, "flash_attn": "on", "timeout_s": 120}}


def kv_anchor(**fields):
    data = dict(id="law4.test.kv-quality", law="law4", claim="test", quantity="kv_ppl_ratio", unit="x",
                kind="ratio", value=1.00031, band={"abs": 0.0188}, profiles=["cpu"], noise="deterministic",
                case=CASE, arms={"a": {"kv_type": "q8_0"}, "b": {"kv_type": "f16"}},
                budget={"min_samples": 3, "max_samples": 3, "batch": 1, "timeout_s": 600},
                provenance={"seed": "000_4a91008eeaefec79.txt", "register_id": "L-24", "quote": "test",
                            "band_rationale": "test"})
    data.update(fields)
    return make_anchor(**data)


def test_each_arm_runs_llama_perplexity_at_its_own_kv_type_and_placement():
    anchor = law_anchors(Law4())[L24]
    args = {arm: perplexity_args(c, PROFILES["gtx1060"]) for arm, c in kv_cases(anchor).items()}
    assert args["a"][:4] == ["-ctk", "q8_0", "-ctv", "q8_0"] and args["b"][:4] == ["-ctk", "f16", "-ctv", "f16"]
    for a in args.values():  # prereg #91's command: -ngl 99, 16 layers of experts on the CPU, --no-mmap, -fa 1
        assert a[4:] == ["-ngl", "99", "--n-cpu-moe", "16", "-fa", "on", "--no-mmap"]
    cpu = perplexity_args(kv_cases(kv_anchor())["a"], PROFILES["cpu"])
    assert cpu == ["-ctk", "q8_0", "-ctv", "q8_0", "-ngl", "0", "-fa", "on"]  # no GPU tier: nothing offloaded
    k_only = kv_cases(kv_anchor(arms={"a": {"kv_type": "q8_0", "bench": {"cache_type_v": "f16"}},
                                      "b": {"kv_type": "f16"}}))["a"]
    assert perplexity_args(k_only, PROFILES["cpu"])[:4] == ["-ctk", "q8_0", "-ctv", "f16"]


@pytest.mark.parametrize("fields, field", [
    (dict(arms={"a": {"kv_type": "q8_0"}, "b": {"kv_type": "q8_0"}}), "arms.b.kv_type"),  # cannot vary
    (dict(arms={"a": {"kv_type": "q8_0"}, "b": {"kv_type": "f16", "perplexity": {"ctx": 256}}}), "arms.b.perplexity"),
    (dict(kind="measurement", arms={}), "kind"),
    (dict(case={**CASE, "perplexity": {**CASE["perplexity"], "text": "no-such-text.txt"}}), "case.perplexity.text"),
])
def test_a_bad_kv_quality_case_is_refused_naming_its_field(fields, field):
    with pytest.raises(DataError) as exc:
        Law4().check_anchor(kv_anchor(**fields))
    assert exc.value.field == field, str(exc.value)


def test_the_l24_anchor_skips_off_its_box_and_fails_strict():
    anchor = law_anchors(Law4())[L24]
    assert (anchor.value, anchor.band.abs) == (1.00031, 0.0188)  # the register's figure and its ±
    r = evaluate_anchor(anchor, Law4(), profile=PROFILES["gtx1060"], on_own_runner=False)
    assert r.verdict is Verdict.SKIP and "gtx1060" in r.reason
    strict = evaluate_anchor(anchor, Law4(), profile=PROFILES["gtx1060"], on_own_runner=False, strict=True)
    assert strict.verdict is Verdict.FAIL and strict.strict_skip


def test_a_runners_text_that_is_not_here_is_a_skip_and_a_failure_on_its_runner(monkeypatch, tmp_path):
    from lawbench.core.errors import NotApplicable
    from lawbench.plugins.law4.kv_quality import text_file

    monkeypatch.delenv("LAWBENCH_MODEL_DIR", raising=False)
    with pytest.raises(NotApplicable, match="wikitext2_test.txt"):
        text_file("path:${LAWBENCH_MODEL_DIR}/wikitext2_test.txt", L24)
    (tmp_path / "wikitext2_test.txt").write_text("text\n", encoding="utf-8")
    monkeypatch.setenv("LAWBENCH_MODEL_DIR", str(tmp_path))
    assert text_file("path:${LAWBENCH_MODEL_DIR}/wikitext2_test.txt", L24) == tmp_path / "wikitext2_test.txt"


@pytest.mark.integration
def test_the_kv_ppl_ratio_measures_here_and_a_band_it_cannot_meet_is_red():
    from lawbench.core.run.resources import Resources

    res = Resources(profile=PROFILES["cpu"])
    try:
        law = Law4()
        here = evaluate_anchor(kv_anchor(), law, profile=PROFILES["cpu"], resources=res)
        print(f"kv_ppl_ratio q8_0/f16 here: {here.measured:.5f} {here.interval} {here.verdict.value}")
        # q8_0 KV costs SmolLM2 little; whether 3 slices at ctx 128 resolve ±0.0188 is the text's scatter
        assert here.verdict in (Verdict.PASS, Verdict.VOID), here.reason
        assert 0.97 < here.measured < 1.03
        visits = here.measurement.protocol["visits"]
        assert [v["slice"] for v in visits] == [0, 0, 1, 1, 2, 2]  # both arms on one slice a round
        assert here.measurement.protocol["kv_types"] == {"a": ["q8_0", "q8_0"], "b": ["f16", "f16"]}
        again = evaluate_anchor(kv_anchor(), law, profile=PROFILES["cpu"], resources=res)
        assert again.measured == pytest.approx(here.measured, rel=1e-4)  # a perplexity repeats

        wrong = evaluate_anchor(kv_anchor(value=1.10), law, profile=PROFILES["cpu"], resources=res)
        print(f"kv_ppl_ratio against 1.10 ± 0.0188: {wrong.measured:.5f} {wrong.interval} {wrong.verdict.value}")
        assert wrong.verdict is Verdict.FAIL, wrong.reason
    finally:
        res.close()
