"""`lawbench predict` prices a model from its header: the first 10 MB are enough."""
import json

from conftest import run_cli

from lawbench.core.store.real import ModelStore


def test_first_10_mb_prices_like_the_whole_file(cli_env, tmp_path):
    whole = ModelStore().path("gemma3-270m-q4_k_m")  # a real file from the PyPI part packages
    head = tmp_path / "gemma-head.gguf"
    with open(whole, "rb") as src:
        head.write_bytes(src.read(10_000_000))
    out = {}
    for name, path in (("whole", whole), ("head", head)):
        p = run_cli(["predict", str(path), "--profile", "cpu-ddr4", "--ctx", "4096", "--json"], cli_env, tmp_path)
        assert p.returncode == 0, p.stderr
        out[name] = json.loads(p.stdout)
    assert out["head"]["active_bytes_per_token"] == out["whole"]["active_bytes_per_token"] > 0
    assert out["head"]["kv_bytes_per_pos"] == out["whole"]["kv_bytes_per_pos"]
    assert [pl["tok_s"] for pl in out["head"]["placements"]] == [pl["tok_s"] for pl in out["whole"]["placements"]]


def test_truncated_inside_header_is_one_line(cli_env, tmp_path):
    whole = ModelStore().path("smollm2-135m-q4_1")
    head = tmp_path / "cut.gguf"
    with open(whole, "rb") as src:
        head.write_bytes(src.read(4096))
    p = run_cli(["predict", str(head), "--profile", "cpu-ddr4"], cli_env, tmp_path)
    assert p.returncode in (1, 2) and "Traceback" not in p.stderr
    assert str(head) in p.stderr and "truncated" in p.stderr
