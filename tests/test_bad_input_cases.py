"""Every anchor's case is checked by its own law in `lawbench check` (and before every run): a
case error is exit 2 naming the real file, the anchor and the dotted field — never a run-time
ERROR, never a silent PASS. Each case below is a real anchor of the repository with one defect."""
from __future__ import annotations

import json
import os
import sys

import pytest
from conftest import HERE, carrier_plugin, run_cli

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = HERE.parent
KV_ANCHOR = """
[[anchor]]
id = "test.kv-bytes-pos.qwen3-30b-a3b"
law = "law4"
claim = "Qwen3-30B-A3B caches 98 KB of f16 K/V per position."
quantity = "kv_bytes_per_pos"
unit = "KB/pos"
kind = "prediction"
value = 98
band = { abs = 0.5 }
case = { model = "manifest:qwen3-30b-a3b", quantity = "kv_bytes_per_pos", kv_type = "f16" }
provenance = { seed = "000_4a91008eeaefec79.txt" }
"""
MEASURED_ANCHOR = """
[[anchor]]
id = "test.cpu.agree.syn-25m-q4_0"
law = "law4"
claim = "syn-25m-q4_0 decodes as fast as the law says."
quantity = "decode_ratio"
unit = "x"
kind = "agreement"
band = { rel = 0.25 }
profiles = ["cpu"]
case = { quantity = "decode_tok_s", calibrate = true, bench = { n_gen = 16, reps = 3, per_visit = "fastest" } }
arms.a = { model = "gguf:syn-25m-q4_0" }
arms.b = { model = "gguf:syn-400m-f16" }
provenance = { seed = "000_4a91008eeaefec79.txt" }
"""
MINFER_ANCHOR = """
[[anchor]]
id = "test.minfer.plane"
law = "minfer"
claim = "The plane is this many bytes."
quantity = "plane_bytes"
unit = "B"
kind = "prediction"
value = 1000
band = { rel = 0.01 }
case = { measure = "plane_bytes", shapes = [{ name = "attn_v", count = 1, od = 4, id = 256 }] }
provenance = { seed = "002_73bfd6a23252a67a.txt" }
"""


def _ship(tmp_path, toml_text: str):
    """One extra anchor file, shipped by a real (tiny) plugin distribution in tmp_path/site."""
    tomllib.loads(toml_text)  # the defect is in the data, never in the TOML syntax
    return carrier_plugin(tmp_path / "site", "extra", {"extra.toml": toml_text}, dist="lawbench-extra-anchors")


def _check_with(tmp_path, cli_env, toml_text: str):
    """`lawbench check` with one extra anchor file, shipped by a real (tiny) plugin distribution."""
    package = _ship(tmp_path, toml_text)
    site = package.parent
    p = run_cli(["check"], dict(cli_env, PYTHONPATH=str(site)), tmp_path)
    return p, str(package / "anchors" / "extra.toml")


def test_the_unchanged_anchors_pass_check(tmp_path, cli_env):
    # the same anchors with other ids: the control for every defect below
    text = KV_ANCHOR + MEASURED_ANCHOR + MINFER_ANCHOR
    p, _ = _check_with(tmp_path, cli_env, text)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("ok:")


@pytest.mark.parametrize("text", ["", "# every anchor commented out\n# [[anchor]]\n# id = \"law4.x\"\n"])
def test_an_anchor_file_without_anchors_fails_check_naming_the_file(tmp_path, cli_env, text):
    """An emptied file would drop its anchors without a word: `check` would say ok with fewer."""
    p, path = _check_with(tmp_path, cli_env, text)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert p.stderr.strip().splitlines() == [f"lawbench: error: {path}: field anchor: holds no [[anchor]] table: "
                                             "an anchor file must define at least one anchor (delete the file to "
                                             "drop its anchors)"]


DEFECTS = [
    # (what, anchor text, old, new, field, words in the message)
    ("a typo inside the case", MEASURED_ANCHOR, "calibrate = true", "calibrate = true, kv_typo = 1",
     "case.kv_typo", "unknown field"),
    ("a typo inside an arm", MEASURED_ANCHOR, 'arms.b = { model = "gguf:syn-400m-f16" }',
     'arms.b = { model = "gguf:syn-400m-f16", ngl = 3 }', "arms.b.ngl", "unknown field"),
    ("quantity disagrees with case.quantity", KV_ANCHOR, 'quantity = "kv_bytes_per_pos"\nunit',
     'quantity = "active_bytes_per_token"\nunit', "quantity", "differs from case.quantity"),
    ("a unit that does not fit the quantity", KV_ANCHOR, 'unit = "KB/pos"', 'unit = "tok/s"', "unit",
     "does not fit quantity"),
    ("a manifest that does not exist", KV_ANCHOR, "manifest:qwen3-30b-a3b", "manifest:qwen3-30b-a3x",
     "case.model", "no manifest 'qwen3-30b-a3x'"),
    ("a catalogue model that does not exist", MEASURED_ANCHOR, "gguf:syn-25m-q4_0", "gguf:syn-25m-q4_9",
     "arms.a.model", "no model 'syn-25m-q4_9'"),
    ("a measured anchor without a bench table", MEASURED_ANCHOR, "calibrate = true, bench = { n_gen = 16, reps = 3, per_visit = \"fastest\" }",
     "calibrate = false", "arms.a.bench", "needs a bench table"),
    ("a two-arm anchor that is not a ratio", MEASURED_ANCHOR, 'quantity = "decode_ratio"', 'quantity = "decode_tok_s"',
     "quantity", "measures decode_ratio"),
    ("a minfer case typo", MINFER_ANCHOR, "measure = ", "mesure = ", "case.mesure", "unknown field"),
    ("a misspelt required field", KV_ANCHOR, 'unit = "KB/pos"', 'unti = "KB/pos"', "unti",
     "unknown field; did you mean 'unit'? (it is required and missing)"),
    ("a minfer shape of zero rows", MINFER_ANCHOR, "od = 4", "od = 0", "case.shapes.0.od", "greater than or equal to 1"),
]


@pytest.mark.parametrize("what,text,old,new,field,words", DEFECTS, ids=[d[0] for d in DEFECTS])
def test_a_case_defect_is_exit_2_naming_file_anchor_and_field(tmp_path, cli_env, what, text, old, new, field, words):
    assert old in text
    bad = text.replace(old, new, 1)
    anchor_id = tomllib.loads(bad)["anchor"][0]["id"]
    p, file = _check_with(tmp_path, cli_env, bad)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith(f"lawbench: error: {file}: anchor {anchor_id}: field {field}: "), line
    assert words in line, line


def test_a_case_defect_stops_a_run_before_anything_runs(tmp_path, cli_env):
    bad = MEASURED_ANCHOR.replace("calibrate = true", "calibrate = true, kv_typo = 1")
    site = _ship(tmp_path, bad).parent  # (the check of this very file is the test above)
    out = tmp_path / "out"
    p = run_cli(["run", "--profile", "cpu", "--out", str(out)], dict(cli_env, PYTHONPATH=str(site)), tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "field case.kv_typo" in p.stderr.strip().splitlines()[-1]
    assert not (out / "run.json").exists()  # refused before pytest started: nothing ran


def test_a_defect_in_a_plugin_the_run_did_not_select_is_set_aside(tmp_path, cli_env):
    """A run of --law dummy names the unrelated broken plugin and runs: it never blocks others."""
    bad = KV_ANCHOR.replace('unit = "KB/pos"', 'unit = "tok/s"')  # shipped by the 'extra' law's package
    site = _ship(tmp_path, bad).parent
    out = tmp_path / "out"
    env = dict(cli_env, PYTHONPATH=os.pathsep.join([str(site), cli_env["PYTHONPATH"]]))
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", str(out), "--no-history"], env, tmp_path)
    assert "Traceback" not in p.stderr
    warning = next(line for line in p.stderr.splitlines() if "broken plugin" in line)
    assert "distribution lawbench-extra-anchors 0.1.0" in warning and "set aside" in warning
    assert p.returncode == 1, p.stdout[-2000:]  # the dummy law ran: its sum-fail anchor is a real FAIL
    ran = {r["anchor_id"] for r in json.loads((out / "run.json").read_text(encoding="utf-8"))["results"]}
    assert "dummy.sum-pass" in ran and "test.kv-bytes-pos.qwen3-30b-a3b" not in ran


def test_schema_exports_each_laws_case_model(tmp_path, cli_env):
    p = run_cli(["schema", "--out", str(tmp_path / "schemas")], cli_env, tmp_path)
    assert p.returncode == 0, p.stderr
    names = sorted(f.name for f in (tmp_path / "schemas").iterdir())
    assert {"case-law4.schema.json", "case-minfer.schema.json", "case-dummy.schema.json",
            "anchors.schema.json", "profile.schema.json"} <= set(names)
    assert "kv_type" in (tmp_path / "schemas" / "case-law4.schema.json").read_text(encoding="utf-8")


def test_schema_into_an_unwritable_folder_is_exit_2(tmp_path, cli_env):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    p = run_cli(["schema", "--out", str(blocker / "schemas")], cli_env, tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert f"--out {blocker / 'schemas'}" in p.stderr


def test_the_shipped_repository_anchors_all_pass_their_laws_checks():
    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.core.claims.loading import load_all
    from lawbench.core.laws.registry import build_registry, make_plugin_manager

    reg = build_registry(make_plugin_manager(autoload=False))
    anchors = load_all(reg, profiles=load_profiles().keys())
    assert len(anchors.anchors) >= 60
    assert all(str(ROOT) in la.file or "site-packages" in la.file for la in anchors.anchors)
