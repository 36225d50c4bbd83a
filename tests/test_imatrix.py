"""llama-imatrix: the parser on a file the real tool wrote, the output-error weighting on a
constructed case, faults as one line, and (integration) a real SmolLM2 run, cached, feeding Law 1."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _engine_fixtures import llama, smollm2  # noqa: F401

from lawbench.core.engines.imatrix import cached_imatrix, imatrix_command, parse_imatrix, run_imatrix
from lawbench.core.errors import EngineError
from lawbench.plugins.law1.gauges import quantize_in_gauge, rel_output_error

REC = Path(__file__).parent / "data" / "imatrix"  # real llama-imatrix b11434 output; .cmd says how
TINY_IMATRIX = REC / "tiny.c32-n2.imatrix.gguf"


def test_parser_reads_the_real_tools_file():
    from gguf import GGUFReader

    got = parse_imatrix(TINY_IMATRIX)
    # the TINY spec: 2 blocks, n_embd 256, n_ff 512; every weight tensor that a matmul reads
    roles = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}
    assert set(got) == {f"blk.{b}.{r}.weight" for b in (0, 1) for r in roles}
    assert got["blk.0.ffn_down.weight"].mean_sq.shape == (512,)
    assert got["blk.1.attn_k.weight"].mean_sq.shape == (256,)
    assert {e.tokens for e in got.values()} == {64}  # 2 chunks of 32 tokens
    # q, k and v read the same normed stream: the same statistics
    assert np.array_equal(got["blk.0.attn_q.weight"].mean_sq, got["blk.0.attn_v.weight"].mean_sq)
    reader = GGUFReader(TINY_IMATRIX)
    raw = {t.name: np.asarray(t.data, dtype=np.float64) for t in reader.tensors}
    for name, e in got.items():
        assert (e.mean_sq >= 0).all()
        # the tool's own summary (stats[0], "sum_sq" in imatrix.stats_schema) is the sum of the means
        assert e.mean_sq.sum() == pytest.approx(raw[name + ".stats"][0], rel=1e-4)
        assert np.allclose(e.mean_sq, raw[name + ".in_sum2"] / raw[name + ".counts"][0])


def test_parser_refuses_what_is_not_an_imatrix(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"not a gguf")
    with pytest.raises(EngineError, match="x.gguf: not a readable GGUF imatrix"):
        parse_imatrix(bad)
    import gguf

    w = gguf.GGUFWriter(str(tmp_path / "model.gguf"), "llama")
    w.add_tensor("blk.0.attn_k.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    with pytest.raises(EngineError, match="not 'imatrix'"):
        parse_imatrix(tmp_path / "model.gguf")


def test_output_error_weighting_follows_the_activations():
    """A constructed case: the error lands on input column 0 only. Inputs that never use column 0
    see no output error; inputs that use only column 0 see all of it; isotropic inputs the weight
    error itself. The weighting is tr(E diag(m) E^T) / tr(W diag(m) W^T)."""
    w = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0]])
    wq = w.copy()
    wq[:, 0] += [0.5, -0.5]
    assert rel_output_error(w, wq, np.array([0.0, 1.0, 1.0])) == 0.0
    assert rel_output_error(w, wq, np.array([1.0, 0.0, 0.0])) == pytest.approx(0.5 / 1.0)
    assert rel_output_error(w, wq, np.ones(3)) == pytest.approx(0.5 / 15.0)
    m = np.array([4.0, 1.0, 0.25])
    assert rel_output_error(w, wq, m) == pytest.approx(0.5 * 4 / (1 * 4 + 5 * 1 + 9 * 0.25))
    # the diagonal vector and the full matrix with that diagonal agree
    assert rel_output_error(w, wq, m) == pytest.approx(rel_output_error(w, wq, np.diag(m)))
    # and on real arithmetic: a gauge ratio under outlier activations differs from the isotropic one
    rng = np.random.default_rng(0)
    big = rng.standard_normal((64, 128)).astype(np.float32)
    nat, had = (quantize_in_gauge(big, 2, 64, g, seed=1) for g in ("native", "hadamard"))
    outlier = np.ones(128)
    outlier[:4] = 100.0
    iso = rel_output_error(big, had, np.ones(128)) / rel_output_error(big, nat, np.ones(128))
    out = rel_output_error(big, had, outlier) / rel_output_error(big, nat, outlier)
    assert iso != pytest.approx(out, rel=1e-3)


def test_command_and_a_missing_tool_are_one_line(tmp_path):
    class Fake:
        bin_dir = tmp_path

    cmd = imatrix_command(Fake(), Path("m.gguf"), Path("t.txt"), Path("o.gguf"), ctx=64, chunks=3, threads=1)
    assert cmd[0].endswith("llama-imatrix") and cmd[cmd.index("--chunks") + 1] == "3"
    assert "--no-ppl" in cmd and cmd[cmd.index("-b") + 1] == "64" and cmd[cmd.index("-t") + 1] == "1"
    with pytest.raises(EngineError, match="has no llama-imatrix") as exc:
        run_imatrix(Fake(), tmp_path / "m.gguf", tmp_path / "t.txt", tmp_path / "o.gguf")
    assert "\n" not in str(exc.value)


@pytest.mark.integration
def test_real_smollm2_imatrix_is_cached_and_feeds_law1(llama, smollm2, tmp_path):  # noqa: F811
    from lawbench.core.engines.perplexity import shipped_text
    from lawbench.plugins.law1.case import Law1Case
    from lawbench.plugins.law1.measure import tensor_effect

    text = shipped_text()
    first = cached_imatrix(llama, smollm2, "0" * 64, text, ctx=64, chunks=2, threads=1, folder=tmp_path)
    assert not first.cached and first.wall_s > 0 and first.settings["tokens"] == 128
    m = first.second_moment("blk.3.attn_k.weight")
    assert m.shape == (576,) and (m > 0).all()
    # SmolLM2's residual stream has outlier channels: the real statistics are far from isotropic
    assert m.max() / np.median(m) > 10
    mtime = first.path.stat().st_mtime_ns
    again = cached_imatrix(llama, smollm2, "0" * 64, text, ctx=64, chunks=2, threads=1, folder=tmp_path)
    assert again.cached and again.path == first.path and again.path.stat().st_mtime_ns == mtime
    assert np.array_equal(again.second_moment("blk.3.attn_k.weight"), m)
    other = cached_imatrix(llama, smollm2, "0" * 64, text, ctx=64, chunks=3, threads=1, folder=tmp_path)
    assert not other.cached and other.path != first.path
    # attn_output reads un-normalized activations: only the imatrix describes them
    case = Law1Case(model="gguf:smollm2-135m-q4_1", role="attn_output", layers=[0, 1, 2], bits=2)
    got = tensor_effect(str(smollm2), case, 3, seed=0, imatrix=first)
    assert got["activations"] == "imatrix" and got["inputs"].startswith("imatrix: mean x^2")
    assert 0 < got["ratio"] < 10
    with pytest.raises(EngineError, match="tokenizes to only 3 tokens"):
        short = tmp_path / "short.txt"
        short.write_text("a few words\n", encoding="utf-8")
        run_imatrix(llama, smollm2, short, tmp_path / "s.gguf", ctx=64, chunks=2, threads=1)
