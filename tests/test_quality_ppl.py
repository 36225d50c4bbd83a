"""Law quality's absolute perplexity ("ppl": one file's PPL, a gate's score such as Bonsai-27B's
10.87 ± 0.34): the real llama-perplexity on SmolLM2-135M here, as the stand-in for the gtx1060
anchors of anchors/quality/gtx1060-bonsai.toml, whose files only that runner has."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from _engine_fixtures import llama, smollm2  # noqa: F401
from test_quality import ANCHOR, SRC, _anchor, _check_with, _decide, _decide_again, _Profile, _Res

from lawbench.core.errors import NotApplicable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PPL = (ANCHOR.replace('quantity = "ppl_delta_ratio"', 'quantity = "ppl"')
       .replace('statistic = "ppl_delta_ratio", reference = { model = "gguf:smollm2-135m-q4_1" }', 'statistic = "ppl"')
       .replace('arms.b = { model = "gguf:smollm2-135m-q4_1", quantize = "IQ4_NL" }\n', ''))


def test_a_ppl_anchor_passes_check_and_a_second_arm_is_exit_2_naming_the_field(tmp_path, cli_env):
    assert 'statistic = "ppl"' in PPL and "arms.b" not in PPL
    p, _ = _check_with(tmp_path, cli_env, PPL)
    assert p.returncode == 0, p.stderr
    p, file = _check_with(tmp_path, cli_env, PPL + 'arms.b = { model = "gguf:smollm2-135m-q4_1" }\n')
    line = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert line.startswith(f"lawbench: error: {file}: anchor test.quality.delta-ratio: field arms"), line
    assert "needs arms ['a']" in line, line


def test_a_gate_of_all_its_chunks_must_score_every_chunk(tmp_path, cli_env):
    gate = PPL.replace('statistic = "ppl"', 'statistic = "ppl", population = "chunks"')
    p, _ = _check_with(tmp_path, cli_env, gate)
    assert p.returncode == 0, p.stderr
    p, file = _check_with(tmp_path, cli_env, gate.replace("min_samples = 4,", "min_samples = 3,"))
    line = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 2 and line.startswith(f"lawbench: error: {file}: anchor test.quality.delta-ratio: "
                                                 "field budget.min_samples"), line
    assert "figure of all 4 chunks" in line, line


def test_ppl_is_the_whole_text_perplexity_and_its_jackknife_centres_on_it():
    from lawbench.plugins.quality.case import QualityCase
    from lawbench.plugins.quality.law import jackknife, whole_text

    case = QualityCase(chunks=4, statistic="ppl")
    nll = {"a": [2.3, 2.5, 2.1, 2.4]}
    assert whole_text(case, nll) == pytest.approx(math.exp(9.3 / 4))
    pseudo = jackknife(case, nll)
    assert sum(pseudo) / 4 == pytest.approx(math.exp(9.3 / 4)) and len(set(round(v, 9) for v in pseudo)) == 4


def test_the_shipped_bonsai_anchors_skip_here_naming_the_file(monkeypatch):
    """Runner-bound: Bonsai-27B and the q30 D file are the register owner's (a SKIP here)."""
    import lawbench.plugins.quality.law as q
    from lawbench.core.models import Anchor

    doc = tomllib.loads((Path(q.__file__).parents[2] / "anchors" / "quality" / "gtx1060-bonsai.toml").read_text())
    monkeypatch.delenv("LAWBENCH_MODEL_DIR", raising=False)
    assert {t["case"]["statistic"] for t in doc["anchor"]} == {"ppl", "ppl_delta"}
    for table in doc["anchor"]:
        a = Anchor.model_validate(table)
        with pytest.raises(NotApplicable, match="LAWBENCH_MODEL_DIR|does not exist"):
            q.Quality().sampler(a, None, None)


@pytest.mark.integration
def test_real_ppl_is_the_tools_final_estimate_and_turns_red_on_a_wrong_value(
        llama, smollm2, tmp_path, monkeypatch):  # noqa: F811
    from lawbench.plugins.quality.law import Quality

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path))
    s = Quality().sampler(_anchor("ppl", "measurement", {"a": SRC}), _Profile(), _Res(llama, smollm2))
    d = _decide(s, (0.0, 1e9))
    run = s.runs["a"]
    print(f"measured: SmolLM2-135M Q4_1 ppl {d.statistic:.4f} interval {d.interval}; the tool's final "
          f"estimate {run['final_ppl']}")
    assert d.statistic == pytest.approx(math.exp(sum(run["chunk_nll"]) / 4), rel=1e-9)
    assert d.statistic == pytest.approx(run["final_ppl"], rel=2e-3)  # the figure a gate log prints
    lo, hi = d.interval
    assert lo < d.statistic < hi
    assert _decide_again(s, (lo - 1, hi + 1)) == "PASS"
    assert _decide_again(s, (hi + 1, hi + 3)) == "FAIL"  # a published value above the file's perplexity
    assert _decide_again(s, (max(lo - 3, 0.0), lo - 1)) == "FAIL"

    # the gate's reading: the figure of exactly these 4 chunks, judged by a ± of the source's size
    gate = Quality().sampler(_anchor("ppl", "measurement", {"a": SRC}), _Profile(), _Res(llama, smollm2))
    gate.case = gate.case.model_copy(update={"population": "chunks"})
    gate.per_chunk = s.per_chunk  # scored above; a second process prints the same digits
    figure = d.statistic
    d = _decide(gate, (figure - 0.34, figure + 0.34))
    assert d.verdict.value == "PASS" and d.interval == pytest.approx((figure, figure), rel=1e-12), d.reason
    assert _decide_again(gate, (figure + 0.01, figure + 0.69)) == "FAIL"  # 10.87 ± 0.34 against 10.85
    assert _decide_again(gate, (figure - 0.69, figure - 0.01)) == "FAIL"
    assert "population = chunks" in gate.protocol()["interval"]
