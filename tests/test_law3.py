"""Law 3 (depth fragility): case checks through `lawbench check`, the band override command line,
and a real fragility run on SmolLM2-135M with the real llama-quantize and llama-perplexity."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from _engine_fixtures import llama, smollm2  # noqa: F401
from conftest import HERE, carrier_plugin, run_cli

from lawbench.core.errors import EngineError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = HERE.parent
ANCHOR = """
[[anchor]]
id = "test.law3.nonuniform"
law = "law3"
claim = "Layers 0-4 of SmolLM2 are more fragile at Q2_0 than layers 15-19."
quantity = "ppl_ratio"
unit = "x"
kind = "ratio"
band = { lo = 1.0 }
profiles = ["cpu"]
case = { model = "gguf:smollm2-135m-q4_1", low_type = "q2_0", ctx = 128, chunks = 3, bytes = "equal" }
arms.a = { layers = [0, 1, 2, 3, 4] }
arms.b = { layers = [15, 16, 17, 18, 19] }
provenance = { seed = "000_4a91008eeaefec79.txt" }
"""


def _check_with(tmp_path, cli_env, toml_text: str):
    tomllib.loads(toml_text)  # the defect is in the data, never in the TOML syntax
    package = carrier_plugin(tmp_path / "site", "extra", {"extra.toml": toml_text}, dist="lawbench-extra-anchors")
    p = run_cli(["check"], dict(cli_env, PYTHONPATH=f"{package.parent}:{cli_env['PYTHONPATH']}"), tmp_path)
    return p, str(package / "anchors" / "extra.toml")


def test_the_unchanged_anchor_passes_check(tmp_path, cli_env):
    p, _ = _check_with(tmp_path, cli_env, ANCHOR)
    assert p.returncode == 0, p.stderr


DEFECTS = [
    ("a typo in the case", "bytes = \"equal\" }", "bytes = \"equal\", chunkz = 2 }", "case.chunkz", "unknown field"),
    ("a low type the recipes refuse", 'low_type = "q2_0"', 'low_type = "q9_9"', "case.low_type", "Input should be"),
    ("a typo in an arm", "arms.b = { layers", "arms.b = { layerz", "arms.b.layerz", "unknown field"),
    ("a negative layer", "[0, 1, 2, 3, 4]", "[0, -1, 2, 3, 4]", "arms.a.layers", "never negative"),
    ("a layer named twice", "[0, 1, 2, 3, 4]", "[0, 1, 1, 3, 4]", "arms.a.layers", "names a layer twice"),
    ("equal bytes with unequal layer counts", "[15, 16, 17, 18, 19]", "[15, 16, 17, 18]", "arms.b.layers",
     "as many layers in each arm"),
    ("two arms that are one file", "[15, 16, 17, 18, 19]", "[4, 3, 2, 1, 0]", "arms.b.layers", "the same layers"),
    ("one arm only", "arms.b = { layers = [15, 16, 17, 18, 19] }\n", "", "arms", "needs arms.a and arms.b"),
    ("a damage ratio against the bare source", 'bytes = "equal" }', 'statistic = "damage_ratio" }',
     "arms", "both arms need layers"),
]


@pytest.mark.parametrize("what,old,new,field,words", DEFECTS, ids=[d[0] for d in DEFECTS])
def test_a_case_defect_is_exit_2_naming_file_anchor_and_field(tmp_path, cli_env, what, old, new, field, words):
    assert old in ANCHOR
    bad = ANCHOR.replace(old, new, 1)
    if what == "a damage ratio against the bare source":
        bad = bad.replace("arms.b = { layers = [15, 16, 17, 18, 19] }", "arms.b = { layers = [] }")
    p, file = _check_with(tmp_path, cli_env, bad)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith(f"lawbench: error: {file}: anchor test.law3.nonuniform: field {field}: "), line
    assert words in line, line


# --------------------------------------------------------------------------- the override file


class _T:
    def __init__(self, name, shape, type_name):
        self.name, self.shape, self.type_name = name, shape, type_name


class _H:
    tensors = (_T("token_embd.weight", (576, 49152), "Q8_0"), _T("blk.0.attn_norm.weight", (576,), "F32"),
               _T("blk.0.attn_q.weight", (576, 576), "Q4_1"), _T("blk.1.attn_q.weight", (576, 576), "Q4_1"),
               _T("blk.10.attn_q.weight", (576, 576), "Q4_1"), _T("blk.1.ffn_down.weight", (1536, 576), "Q4_1"))


def test_band_overrides_name_every_quantizable_tensor_anchored_and_keep_the_rest():
    from lawbench.plugins.law3.recipe import chosen_tensors, override_lines, quantize_command

    lines = override_lines(_H(), [1], "Q2_0")
    assert lines == [r"^token_embd\.weight$=q8_0", r"^blk\.0\.attn_q\.weight$=q4_1",
                     r"^blk\.1\.attn_q\.weight$=q2_0", r"^blk\.10\.attn_q\.weight$=q4_1",
                     r"^blk\.1\.ffn_down\.weight$=q2_0"]
    # anchored: layer 1's pattern never catches layer 10 (llama-quantize uses regex_search)
    assert not re.search(r"^blk\.1\.attn_q\.weight$", "blk.10.attn_q.weight")
    assert chosen_tensors(_H(), [1]) == {"blk.1.attn_q.weight", "blk.1.ffn_down.weight"}
    cmd = quantize_command(Path("/q"), Path("src.gguf"), Path("dst.gguf"), Path("types.txt"), threads=1)
    assert cmd == ["/q", "--allow-requantize", "--tensor-type-file", "types.txt", "src.gguf", "dst.gguf",
                   "Q8_0", "1"]


# --------------------------------------------------------------------------- shipped anchors


def _words(text: str) -> str:
    return " ".join(text.split())


def test_shipped_law3_anchors_quote_their_sources_verbatim_and_cite_law3_lines():
    seed = _words((ROOT / "sources" / "seeds" / "000_4a91008eeaefec79.txt").read_text(encoding="utf-8"))
    register = (ROOT / "sources" / "register" / "quantprobe-REGISTER.json").read_text(encoding="utf-8")
    files = sorted((ROOT / "anchors" / "law3").glob("*.toml"))
    anchors = [a for f in files for a in tomllib.loads(f.read_text(encoding="utf-8")).get("anchor", [])]
    assert anchors
    for a in anchors:
        quote = a["provenance"]["quote"]
        for piece in re.split(r"\[\.\.\.\]", _words(quote)):
            if piece.strip():
                assert piece.strip() in seed or piece.strip() in register, (a["id"], piece)
        assert a["claims"] and all(c.startswith(("s000.law3.", "reg.l-03", "reg.l-27")) for c in a["claims"])


# --------------------------------------------------------------------------- a real run


@pytest.mark.integration
def test_real_band_recipe_changes_exactly_its_layers(llama, smollm2, tmp_path):  # noqa: F811
    from lawbench.plugins.law3.recipe import build_recipe

    band = build_recipe(llama, smollm2, [10, 11, 12], "q2_0", tmp_path)
    assert band != smollm2 and band.stat().st_size < smollm2.stat().st_size
    # the builder read llama-quantize's log back: only blk.10-12 were converted, all to q2_0
    again = build_recipe(llama, smollm2, [12, 11, 10], "q2_0", tmp_path)
    assert again == band  # one file per source, layers and type
    with pytest.raises(EngineError, match="converted layers .* not q2_k"):
        build_recipe(llama, smollm2, [10], "q2_k", tmp_path / "k")  # rows of 576: Q2_K falls back


@pytest.mark.integration
def test_real_fragility_run_separates_an_early_band_from_a_middle_one(llama, smollm2, tmp_path, monkeypatch):  # noqa: F811
    from lawbench.core.laws.law import Law
    from lawbench.core.models import Anchor, Budget
    from lawbench.core.stats.verdicts import decide_sequential
    from lawbench.plugins.law3.law import Law3

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path))
    anchor = Anchor.model_validate(tomllib.loads(ANCHOR)["anchor"][0] | {"case": {
        "model": "gguf:smollm2-135m-q4_1", "ctx": 128, "chunks": 2, "bytes": "equal", "first_slice": 8}})

    class Res:
        def llama(self):
            return llama

        def model(self, model_id):
            return smollm2

    class Profile:
        def engine_threads(self):
            return 1

    assert isinstance(Law3(), Law)
    sampler = Law3().sampler(anchor, Profile(), Res())
    info = sampler.protocol()
    assert info["recipes"]["a"]["bytes"] == info["recipes"]["b"]["bytes"] < info["source_bytes"]
    budget = Budget(min_samples=3, max_samples=3, batch=3, timeout_s=600)
    decision = decide_sequential(sampler.draw, sampler.statistic, anchor.band_interval(), budget)
    assert decision.verdict.value == "PASS", decision.reason
    assert decision.interval[0] > 1.0
    assert [s.raw["slice"] for s in decision.samples] == [0, 1, 2]
