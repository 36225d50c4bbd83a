"""The quality law (perplexity deltas, their ratios, KL divergence) and the record text reference:
case checks through `lawbench check`, the KLD parser on real output, the text cache, and real runs
of SmolLM2-135M with the real llama-quantize and llama-perplexity where each statistic turns red on
a wrong value."""
from __future__ import annotations

import hashlib
import math
import sys
from pathlib import Path

import pytest
from _engine_fixtures import DATA, llama, smollm2, synth_dir  # noqa: F401
from conftest import carrier_plugin, run_cli

from lawbench.core.errors import EngineError, NotApplicable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PIN = "f02d7cce5905d68036860c4b06ee7c3e5eba673e"
ANCHOR = """
[[anchor]]
id = "test.quality.delta-ratio"
law = "quality"
claim = "A stand-in: Q4_0's perplexity gain over the source against IQ4_NL's."
quantity = "ppl_delta_ratio"
unit = "x"
kind = "measurement"
band = { lo = 0.1, hi = 10.0 }
noise = "deterministic"
profiles = ["cpu"]
case = { text = { repo = "FedericoTs/quantprobe", commit = "%s", path = "weights/data/wikitext2_test.txt", sha256 = "696cca6b65a171b0a358a4be6732cdfdf2dd6164a32e20fd70e3c13fc4dfae83" }, ctx = 128, chunks = 4, statistic = "ppl_delta_ratio", reference = { model = "gguf:smollm2-135m-q4_1" } }
arms.a = { model = "gguf:smollm2-135m-q4_1", quantize = "Q4_0" }
arms.b = { model = "gguf:smollm2-135m-q4_1", quantize = "IQ4_NL" }
budget = { min_samples = 4, max_samples = 4, batch = 4 }
provenance = { seed = "000_4a91008eeaefec79.txt" }
""" % PIN


def _check_with(tmp_path, cli_env, toml_text: str):
    tomllib.loads(toml_text)
    package = carrier_plugin(tmp_path / "site", "extra", {"extra.toml": toml_text}, dist="lawbench-extra-anchors")
    p = run_cli(["check"], dict(cli_env, PYTHONPATH=f"{package.parent}:{cli_env['PYTHONPATH']}"), tmp_path)
    return p, str(package / "anchors" / "extra.toml")


def test_the_unchanged_anchor_passes_check(tmp_path, cli_env):
    p, _ = _check_with(tmp_path, cli_env, ANCHOR)
    assert p.returncode == 0, p.stderr


DEFECTS = [
    ("a typo in the case", "chunks = 4,", "chunkz = 4,", "case.chunkz", "unknown field"),
    ("a text sha256 that is not one", 'sha256 = "696c', 'sha256 = "XY6c', "case.text", "should match pattern"),
    ("a commit that is not pinned", f'commit = "{PIN}"', 'commit = "main"', "case.text", "should match pattern"),
    ("a shipped text lawbench does not ship", "text = { repo = \"FedericoTs/quantprobe\", commit = \"%s\", path = \"weights/data/wikitext2_test.txt\", sha256 = \"696cca6b65a171b0a358a4be6732cdfdf2dd6164a32e20fd70e3c13fc4dfae83\" }" % PIN,
     'text = "wiki.txt"', "case.text", "lawbench ships no text 'wiki.txt'"),
    ("a statistic of another kind", 'kind = "measurement"', 'kind = "ratio"', "kind", "not a ratio's"),
    ("a delta ratio without its reference", ', reference = { model = "gguf:smollm2-135m-q4_1" }', "", "case.reference",
     "measured against a reference"),
    ("an arm the statistic does not read", 'quantize = "IQ4_NL" }', 'quantize = "IQ4_NL" }\narms.c = { model = "gguf:smollm2-135m-q4_1" }',
     "arms", "needs arms ['a', 'b']"),
    ("more samples than chunks", "max_samples = 4", "max_samples = 5", "budget.max_samples", "more samples than"),
    ("an unknown KV cache type", 'quantize = "Q4_0" }', 'quantize = "Q4_0", cache_type = "q3_0" }',
     "arms.a.cache_type", "Input should be"),
    ("a per-tensor recipe with no base type", 'quantize = "IQ4_NL" }', "tensor_types = ['blk\\.0\\.ffn_.*=q4_0'] }",
     "arms.b", "give quantize"),
    ("a tensor rule with no type", 'quantize = "IQ4_NL" }', "quantize = \"IQ4_NL\", tensor_types = ['blk.0.ffn_down'] }",
     "arms.b.tensor_types.0", "should match pattern"),
    ("an expert count of zero", 'quantize = "Q4_0" }', 'quantize = "Q4_0", experts_used = 0 }',
     "arms.a.experts_used", "greater than or equal to 1"),
]


@pytest.mark.parametrize("what,old,new,field,words", DEFECTS, ids=[d[0] for d in DEFECTS])
def test_a_case_defect_is_exit_2_naming_file_anchor_and_field(tmp_path, cli_env, what, old, new, field, words):
    assert old in ANCHOR
    p, file = _check_with(tmp_path, cli_env, ANCHOR.replace(old, new, 1))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith(f"lawbench: error: {file}: anchor test.quality.delta-ratio: field {field}"), line
    assert words in line, line


# --------------------------------------------------------------------------- the record text


def _record_tree(tmp_path: Path, body: bytes, path="weights/data/t.txt") -> tuple[str, str]:
    f = tmp_path / "mirror" / "FedericoTs" / "quantprobe" / PIN / path
    f.parent.mkdir(parents=True)
    f.write_bytes(body)
    return (tmp_path / "mirror").as_uri(), hashlib.sha256(body).hexdigest()


def test_a_record_text_is_fetched_once_verified_and_kept(tmp_path, monkeypatch):
    from lawbench.engines import RecordText, resolve_text

    body = b"= Robert Boulter =\n\n Robert Boulter is an English film , television and theatre actor .\n"
    base, sha = _record_tree(tmp_path, body)
    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LAWBENCH_RECORD_URL", base)
    ref = RecordText(repo="FedericoTs/quantprobe", commit=PIN, path="weights/data/t.txt", sha256=sha)
    path = resolve_text(ref)
    assert path.read_bytes() == body and path.is_relative_to(tmp_path / "cache" / "texts")
    monkeypatch.setenv("LAWBENCH_RECORD_URL", (tmp_path / "nowhere").as_uri())
    assert resolve_text(ref) == path  # the cache answers; nothing is fetched again
    path.write_bytes(body + b"edited\n")  # a cached copy that is not the pinned bytes is never scored
    with pytest.raises(EngineError, match="cached copy's SHA-256 is .* not the pinned"):
        resolve_text(ref)
    assert not path.exists()


def test_a_record_text_with_other_bytes_is_refused_and_an_unreachable_one_skips(tmp_path, monkeypatch):
    from lawbench.engines import RecordText, resolve_text

    base, sha = _record_tree(tmp_path, b"the record's bytes\n")
    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LAWBENCH_RECORD_URL", base)
    wrong = RecordText(repo="FedericoTs/quantprobe", commit=PIN, path="weights/data/t.txt", sha256="0" * 64)
    with pytest.raises(EngineError, match="not the pinned 0000"):
        resolve_text(wrong)
    assert not list((tmp_path / "cache").rglob("*t.txt"))
    absent = RecordText(repo="FedericoTs/quantprobe", commit=PIN, path="weights/data/gone.txt", sha256=sha)
    with pytest.raises(NotApplicable, match=r"FedericoTs/quantprobe:weights/data/gone.txt@f02d7cce is not in the cache"):
        resolve_text(absent)


def test_the_shipped_gtx1060_quality_anchors_skip_here_naming_what_is_missing(monkeypatch, tmp_path):
    """Runner-bound: the register owner's files are absent here (a SKIP; the runner's FAIL is core's rule)."""
    import lawbench.plugins.quality.law as q
    from lawbench.core.models import Anchor

    monkeypatch.delenv("LAWBENCH_MODEL_DIR", raising=False)
    files = sorted((Path(q.__file__).parents[2] / "anchors" / "quality").glob("gtx1060-*.toml"))
    assert {f.name for f in files} >= {"gtx1060-record.toml", "gtx1060-atlas.toml", "gtx1060-topk.toml"}
    for f in files:
        for table in tomllib.loads(f.read_text(encoding="utf-8"))["anchor"]:
            a = Anchor.model_validate(table)
            with pytest.raises(NotApplicable, match="LAWBENCH_MODEL_DIR|does not exist"):
                q.Quality().sampler(a, None, None)


def test_the_band_probe_and_expert_count_anchors_hold_their_figure_and_refuse_a_probe_that_measured_nothing():
    """Each band holds the published figure, and none holds what a probe that changed nothing reads:
    a band rule that took no tensor scores the base (a delta ratio of 0/0, or equal deltas: 1), an
    expert override the engine ignored scores the file's own k (a ratio of 1, a delta of 0)."""
    import lawbench.plugins.quality.law as q
    from lawbench.core.models import Anchor
    from lawbench.plugins.quality.case import parse_case

    root = Path(q.__file__).parents[2] / "anchors" / "quality"
    seen = {}
    for name in ("gtx1060-atlas.toml", "gtx1060-topk.toml"):
        for table in tomllib.loads((root / name).read_text(encoding="utf-8"))["anchor"]:
            a = Anchor.model_validate(table)
            case, arms = parse_case(a)
            lo, hi = a.band.interval(a.value)
            assert lo <= a.value <= hi, a.id
            nothing = 0.0 if case.statistic == "ppl_delta" else 1.0
            probing = any(arm.tensor_types or arm.experts_used for arm in arms.values())
            if probing:  # on an edge it cannot pass: an interval around it is never wholly inside
                assert not lo < nothing < hi, f"{a.id}: a probe that changed nothing ({nothing}) would pass"
            seen[a.id] = (case.statistic, sorted(arm.experts_used or 0 for arm in arms.values()))
    assert seen["quality.gtx1060.prereg107.k1-over-k8"] == ("ppl_ratio", [0, 1])
    assert seen["quality.gtx1060.atlas.mistral-7b-early-over-late"][0] == "ppl_delta_ratio"


# --------------------------------------------------------------------------- the KLD parser


def test_kld_parser_reads_per_chunk_values_that_average_to_the_tools_own_mean():
    from lawbench.engines import parse_kld

    out = (DATA / "perplexity" / "kld-smollm2-q4_0-c256-chunks6.stdout").read_text(encoding="utf-8")
    err = (DATA / "perplexity" / "kld-smollm2-q4_0-c256-chunks6.stderr").read_text(encoding="utf-8")
    run = parse_kld(out, err)
    assert len(run.chunk_kld) == 6 and run.n_ctx == 256
    assert run.chunk_kld[0] == pytest.approx(0.26551) and run.mean_kld == 0.246917
    assert abs(run.kld - 0.246917) < 1e-5 and run.median_kld == 0.201456 and run.same_top_p == 0.75459
    assert sum(run.chunk_log_ratio) / 6 == pytest.approx(0.228164, abs=1e-5)
    # a running mean that is not the one printed at the end: an unknown format, never a sample
    bad = out.replace("   6      15.7539", "   6      15.7539").replace("0.24692 ±", "0.26692 ±")
    with pytest.raises(EngineError, match="not the final Mean KLD"):
        parse_kld(bad, err)
    with pytest.raises(EngineError, match="not the output of a --kl-divergence run"):
        parse_kld((DATA / "perplexity" / "smollm2-c128-chunks4.stdout").read_text(encoding="utf-8"),
                  (DATA / "perplexity" / "smollm2-c128-chunks4.stderr").read_text(encoding="utf-8"))


def test_the_jackknife_of_a_delta_ratio_centres_on_the_whole_text_figure():
    from lawbench.plugins.quality.case import QualityCase
    from lawbench.plugins.quality.law import jackknife, whole_text

    case = QualityCase(chunks=4, statistic="ppl_delta_ratio", num=["c"], den=["a", "b"])
    nll = {"ref": [2.0, 2.2, 1.9, 2.1], "a": [1.97, 2.18, 1.86, 2.08], "b": [1.9, 2.1, 1.82, 2.0],
           "c": [1.89, 2.1, 1.81, 1.99]}
    p = {k: math.exp(sum(v) / 4) for k, v in nll.items()}
    assert whole_text(case, nll) == pytest.approx((p["c"] - p["ref"]) / (p["a"] + p["b"] - 2 * p["ref"]))
    pseudo = jackknife(case, nll)
    assert len(pseudo) == 4 and sum(pseudo) / 4 == pytest.approx(whole_text(case, nll))
    assert len(set(round(v, 9) for v in pseudo)) == 4  # the chunks' spread, not a constant


# --------------------------------------------------------------------------- real runs


class _Res:
    def __init__(self, llama, model):
        self._llama, self._model = llama, model

    def llama(self):
        return self._llama

    def model(self, model_id):
        return self._model


class _Profile:
    def engine_threads(self):
        return 1


def _anchor(statistic, kind, arms, reference=None, chunks=4, text="python-reference-3.11.txt"):
    from lawbench.core.models import Anchor

    case = {"text": text, "ctx": 128, "chunks": chunks, "statistic": statistic}
    if reference:
        case["reference"] = reference
    return Anchor.model_validate({
        "id": f"test.quality.{statistic}", "law": "quality", "claim": "a stand-in", "quantity": statistic,
        "unit": "x", "kind": kind, "band": {"lo": 0.0, "hi": 1e9}, "case": case, "arms": arms,
        "budget": {"min_samples": chunks, "max_samples": chunks, "batch": chunks},
        "provenance": {"seed": "000_4a91008eeaefec79.txt"}})


def _decide(sampler, band):
    from lawbench.core.models import Budget
    from lawbench.core.stats.verdicts import decide_sequential

    budget = Budget(min_samples=4, max_samples=4, batch=4, timeout_s=600)
    return decide_sequential(sampler.draw, sampler.statistic, band, budget, log=sampler.log_scale)


SRC = {"model": "gguf:smollm2-135m-q4_1"}


@pytest.mark.integration
def test_real_ppl_ratio_and_delta_ratio_are_the_tools_figures_and_turn_red_on_a_wrong_band(
        llama, smollm2, tmp_path, monkeypatch):  # noqa: F811
    from lawbench.plugins.quality.law import Quality

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path))
    res = _Res(llama, smollm2)
    ratio = Quality().sampler(_anchor("ppl_ratio", "ratio", {"a": SRC | {"quantize": "Q4_0"}, "b": SRC}),
                              _Profile(), res)
    d = _decide(ratio, (0.0, 1e9))
    runs = ratio.runs
    want = math.exp(sum(runs["a"]["chunk_nll"]) / 4 - sum(runs["b"]["chunk_nll"]) / 4)
    assert d.statistic == pytest.approx(want, rel=1e-6)
    assert d.statistic == pytest.approx(runs["a"]["final_ppl"] / runs["b"]["final_ppl"], rel=2e-3)
    assert d.statistic > 1.0  # Q4_0 requantized from Q4_1 loses
    lo, hi = d.interval
    assert _decide_again(ratio, (lo * 0.9, hi * 1.1)) == "PASS"
    assert _decide_again(ratio, (0.5, min(lo * 0.99, 1.0))) == "FAIL"  # a band below the measured ratio

    delta = Quality().sampler(_anchor("ppl_delta_ratio", "measurement",
                                      {"a": SRC | {"quantize": "Q4_0"}, "b": SRC | {"quantize": "IQ4_NL"}},
                                      reference=SRC), _Profile(), res)
    d = _decide(delta, (-1e9, 1e9))
    p = {k: v["final_ppl"] for k, v in delta.runs.items()}
    print(f"measured: ppl_ratio Q4_0/Q4_1 {ratio.runs['a']['ppl']:.4f}/{ratio.runs['b']['ppl']:.4f} = "
          f"{want:.5f}; delta ratio (Q4_0-ref)/(IQ4_NL-ref) {d.statistic:.4f} interval {d.interval} "
          f"(final ppl {p})")
    assert (p["a"] - p["ref"]) / (p["b"] - p["ref"]) == pytest.approx(d.statistic, rel=2e-3)
    lo, hi = d.interval
    assert lo <= d.statistic <= hi
    assert _decide_again(delta, (hi + abs(hi) + 1, hi + abs(hi) + 2)) == "FAIL"

    # ppl_delta on the same real chunks: PPL(Q4_0) - PPL(IQ4_NL), the whole-text difference
    diff = Quality().sampler(_anchor("ppl_delta", "measurement", {"a": SRC | {"quantize": "Q4_0"},
                                                                  "b": SRC | {"quantize": "IQ4_NL"}}), _Profile(), res)
    diff.per_chunk = {k: delta.per_chunk[k] for k in ("a", "b")}  # scored above; a second process prints the same
    d = _decide(diff, (-1e9, 1e9))
    assert d.statistic == pytest.approx(p["a"] - p["b"], abs=2e-3)
    lo, hi = d.interval
    assert _decide_again(diff, (lo - 1, hi + 1)) == "PASS"
    assert _decide_again(diff, (hi + 0.5, hi + 5)) == "FAIL"


def _decide_again(sampler, band):
    sampler.next = 0  # the same chunks again: the figures are the process's, already scored
    return _decide(sampler, band).verdict.value


# The register's band probe (quantprobe/recipes/*.json: "one band's FFNs -> q2_k at a time, rest at base;
# delta vs reference") on SmolLM2-135M: its FFN rows are 576 wide, not a multiple of 256, so the
# stand-in's band goes to Q4_0 over a Q8_0 base (a K-quant would fall back); the recipe path is the same.
EARLY = r"blk\.(0|1|2|3|4|5|6|7)\.ffn_.*=q4_0"
LATE = r"blk\.(22|23|24|25|26|27|28|29)\.ffn_.*=q4_0"


@pytest.mark.integration
def test_real_band_probe_quantizes_only_the_band_and_its_delta_ratio_turns_red_on_a_wrong_value(
        llama, smollm2, tmp_path, monkeypatch):  # noqa: F811
    from lawbench.core.errors import DataError
    from lawbench.plugins.quality.law import Quality

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path))
    res = _Res(llama, smollm2)
    base = SRC | {"quantize": "Q8_0"}
    probe = Quality().sampler(_anchor("ppl_delta_ratio", "measurement",
                                      {"a": base | {"tensor_types": [EARLY]}, "b": base | {"tensor_types": [LATE]}},
                                      reference=base), _Profile(), res)
    arms = probe.info["arms"]
    # the band's 8 layers x 3 FFN tensors, and nothing else, left the base type
    # (the rule's regex also selects the bands' ffn_norm vectors, which llama-quantize keeps in F32)
    assert arms["a"]["tensor_types"] == {EARLY: {"Q4_0": 24, "F32": 8}}
    assert arms["b"]["tensor_types"] == {LATE: {"Q4_0": 24, "F32": 8}}
    assert arms["a"]["file"] != arms["b"]["file"] != arms["ref"]["file"]
    from lawbench import read_gguf_header

    for arm, band in (("a", range(0, 8)), ("b", range(22, 30))):
        path = next((tmp_path / "quality" / "quantized").glob(arms[arm]["file"]))
        for t in read_gguf_header(path).tensors:
            in_band = t.name.startswith(tuple(f"blk.{i}.ffn_" for i in band)) and t.name.endswith("weight") \
                and "norm" not in t.name
            assert (t.type_name == "Q4_0") == in_band or t.type_name in ("F32",), (arm, t.name, t.type_name)
    d = _decide(probe, (-1e9, 1e9))
    p = {k: v["final_ppl"] for k, v in probe.runs.items()}
    print(f"measured: band probe ref {p['ref']:.4f}, early band {p['a']:.4f}, late band {p['b']:.4f}; "
          f"delta ratio early/late {d.statistic:.4f} interval {d.interval}")
    assert p["a"] > p["ref"] and p["b"] > p["ref"]  # each band at Q4_0 costs perplexity over the Q8_0 base
    assert (p["a"] - p["ref"]) / (p["b"] - p["ref"]) == pytest.approx(d.statistic, rel=5e-3)
    lo, hi = d.interval
    assert _decide_again(probe, (lo - abs(lo) * 0.1, hi + abs(hi) * 0.1)) == "PASS"
    assert _decide_again(probe, (hi + abs(hi) + 1, hi + abs(hi) + 2)) == "FAIL"  # a wrong value: red

    # a rule that selects no tensor would score the base as the band: refused, naming the rule
    with pytest.raises(DataError, match=r"field arms.a.tensor_types.0: .*selects no tensor"):
        Quality().sampler(_anchor("ppl_delta_ratio", "measurement",
                                  {"a": base | {"tensor_types": [r"blk\.(40|41)\.ffn_.*=q4_0"]},
                                   "b": base | {"tensor_types": [LATE]}}, reference=base), _Profile(), res)


@pytest.mark.integration
def test_real_expert_count_override_changes_every_chunk_and_is_refused_where_it_cannot_hold(
        llama, smollm2, synth_dir, tmp_path, monkeypatch):  # noqa: F811
    """Pre-registrations #18 and #107 scored perplexity with --override-kv <arch>.expert_used_count.
    Stand-in: a tiny llama-architecture MoE (4 experts, k = 2; random weights, so only the mechanism
    is judged, never a perplexity) at k = 1 against its own k = 2."""
    from test_batched_bench import write_moe

    from lawbench.core.errors import DataError
    from lawbench.plugins.quality.law import Quality

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path))
    moe = write_moe(tmp_path / "moe-4x2.gguf")
    res = _Res(llama, moe)
    m = {"model": f"path:{moe}"}
    s = Quality().sampler(_anchor("ppl_ratio", "ratio", {"a": m | {"experts_used": 1}, "b": m}), _Profile(), res)
    assert s.info["arms"]["a"]["args"] == ["--override-kv", "llama.expert_used_count=int:1"]
    d = _decide(s, (0.0, 1e9))
    a, b = s.runs["a"]["chunk_nll"], s.runs["b"]["chunk_nll"]
    print(f"measured: tiny MoE ppl k=1 {s.runs['a']['final_ppl']} against k=2 {s.runs['b']['final_ppl']}, "
          f"ratio {d.statistic:.5f} interval {d.interval}")
    assert "--override-kv" in s.runs["a"]["cmd"] and "--override-kv" not in s.runs["b"]["cmd"]
    assert all(x != y for x, y in zip(a, b))  # an override the engine ignored would score identical chunks
    lo, hi = d.interval
    assert _decide_again(s, (lo * 0.9, hi * 1.1)) == "PASS"
    assert _decide_again(s, (hi * 1.05, hi * 1.5)) == "FAIL"  # a value the run does not show: red

    with pytest.raises(DataError, match=r"field arms.a.experts_used: experts_used = 9, but moe-4x2.gguf has 4 experts"):
        Quality().sampler(_anchor("ppl_ratio", "ratio", {"a": m | {"experts_used": 9}, "b": m}), _Profile(), res)
    dense = _Res(llama, smollm2)
    with pytest.raises(DataError, match=r"field arms.a.experts_used: .*is not a mixture of experts"):
        Quality().sampler(_anchor("ppl_ratio", "ratio", {"a": SRC | {"experts_used": 4}, "b": SRC}), _Profile(), dense)


@pytest.mark.integration
def test_real_kld_of_a_file_against_its_own_logits_is_zero_and_of_another_file_fails_the_guard(
        llama, smollm2, tmp_path, monkeypatch):  # noqa: F811
    from lawbench.plugins.quality.law import Quality

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path))
    res = _Res(llama, smollm2)
    guard = (0.0, 0.000053)  # pre-registration #98's cannot-vary guard: Maximum KLD 0.000053
    same = Quality().sampler(_anchor("kld_mean", "measurement", {"a": SRC}, reference=SRC), _Profile(), res)
    d = _decide(same, guard)
    assert d.verdict.value == "PASS", (d.reason, same.runs)
    other = Quality().sampler(_anchor("kld_mean", "measurement", {"a": SRC | {"quantize": "Q4_0"}}, reference=SRC),
                              _Profile(), res)
    d = _decide(other, guard)
    print(f"measured: KLD Q4_0 against Q4_1's logits {d.statistic:.5f} interval {d.interval}; "
          f"the tool's Mean KLD {other.runs['a']['mean_kld']}")
    assert d.verdict.value == "FAIL" and d.statistic > 0.05
    assert d.statistic == pytest.approx(other.runs["a"]["mean_kld"], abs=4e-5)
    assert same.info["base_logits"] == other.info["base_logits"]  # one reference run, saved once


def test_an_absent_record_text_fails_the_anchors_own_runner_naming_the_text(tmp_path, monkeypatch):
    """Absent and unreachable: a SKIP elsewhere (lawbench.core.run.evaluate), a FAIL on the runner."""
    from lawbench.core.models import Verdict
    from lawbench.core.run.evaluate import RunPolicy, evaluate
    from lawbench.plugins.quality.law import Quality
    from lawbench.testing import make_profile

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LAWBENCH_RECORD_URL", (tmp_path / "nowhere").as_uri())
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    a = _anchor("ppl_ratio", "ratio", {"a": {"model": f"path:{model}"}, "b": {"model": f"path:{model}", "cache_type": "q8_0"}},
                text={"repo": "FedericoTs/quantprobe", "commit": PIN, "path": "weights/data/wikitext2_test.txt",
                      "sha256": "696cca6b65a171b0a358a4be6732cdfdf2dd6164a32e20fd70e3c13fc4dfae83"})
    a = a.model_copy(update={"profiles": ["here"]})
    here = make_profile("here")
    for strict in (False, True):
        r = evaluate(a, Quality(), RunPolicy(profile=here, profiles={"here": here}, on_own_runner=True, strict=strict))
        assert r.verdict is Verdict.FAIL and r.strict_skip, r.reason
        assert "FedericoTs/quantprobe:weights/data/wikitext2_test.txt@f02d7cce is not in the cache" in r.reason
