"""Numbers no data file may hold (NaN, inf, a zero bandwidth, an η of 2, RAM 20-10 GiB) and
lineages that loop: `lawbench check` refuses each with exit 2 and one line naming the file, the
anchor and the dotted field — never a traceback, never "ok".

Every case is a real file shipped by a real (tiny) plugin distribution: one law whose anchors
package holds the anchors below, and a profiles folder through `lawbench_profile_dirs`. The
unchanged files pass `check` (the control); each test changes one thing.
"""
from __future__ import annotations

import math
import sys
import typing
from pathlib import Path

import pytest
from conftest import carrier_plugin, run_cli
from pydantic import ValidationError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PROFILE = """
id = "bad-input-box"
description = "a box for lawbench's bad-input tests"
threads = 4
[fingerprint]
cpu_model_contains = "No Such CPU 9000"
compute_capability = "6.1"
ram_gb_min = 14.0
ram_gb_max = 17.0
[[tiers]]
name = "ram"
kind = "ram"
capacity_gb = { value = 16.0, source = "test" }
bandwidth_spec_gbs = { value = 48.0, source = "test" }
bandwidth_measured_gbs = { value = 26.1, source = "test" }
[laws.law4.eta]
ram = { value = 0.65, source = "test", basis = "spec" }
[laws.law4.eta_format.ram]
Q4_0 = { value = 0.61, source = "test", basis = "spec" }
[laws.law4.constants]
eta_kv = { value = 0.70, source = "test", basis = "spec" }
cpu_attention_k_us = { value = 1.55, source = "test" }
pcie_bandwidth_gbs = { value = 12.2, source = "test" }
tensor_parallel_efficiency = { value = 0.85, source = "test" }
"""

ANCHORS = """
[[anchor]]
id = "badinput.reading"
law = "badinput"
claim = "A reading of four."
quantity = "reading"
unit = "1"
kind = "prediction"
value = 4.0
band = { abs = 0.5 }
status = "active"
budget = { timeout_s = 60.0, confidence = 0.95 }
provenance = { seed = "tests" }

[[anchor]]
id = "badinput.old"
law = "badinput"
claim = "An older reading, superseded."
quantity = "reading"
unit = "1"
kind = "prediction"
value = 3.0
band = { rel = 0.05 }
status = "superseded"
superseded_by = "badinput.reading"
provenance = { seed = "tests" }

[[anchor]]
id = "badinput.older"
law = "badinput"
claim = "The oldest reading, superseded by the older one."
quantity = "reading"
unit = "1"
kind = "prediction"
value = 2.0
band = { rel = 0.05 }
status = "superseded"
superseded_by = "badinput.old"
provenance = { seed = "tests" }

[[anchor]]
id = "badinput.window"
law = "badinput"
claim = "A reading between 1.2 and 2.5."
quantity = "reading"
unit = "1"
kind = "measurement"
band = { lo = 1.2, hi = 2.5 }
noise = "deterministic"  # the stand-in law replays fixed readings
# a replay takes no time: a budget of its own, so this suite's anchors fit every profile's window
budget = { timeout_s = 30.0 }
provenance = { seed = "tests" }

[[anchor]]
id = "badinput.census"
law = "badinput"
claim = "Three paths of one kind, at least one of another."
quantity = "paths"
unit = "1"
kind = "census"
census = { exact = { "path.a" = 3 }, minimum = { "path.b" = 1 } }
budget = { timeout_s = 30.0 }
provenance = { seed = "tests" }

[[anchor]]
id = "badinput.law4.pure-cpu"
law = "law4"
claim = "Qwen3-30B-A3B Q4 pure-CPU on DDR4-45 falls from 8.0 to 5.7 tok/s at depth 16384."
quantity = "decode_tok_s"
unit = "tok/s"
kind = "prediction"
value = 5.7
band = { abs = 0.05 }
profiles = ["cpu-ddr4"]
[anchor.case]
model = "manifest:qwen3-30b-a3b"
quantity = "decode_tok_s"
ctx = 16384
baseline_tok_s = 8.0
placement = { ngl = 0 }
tiers.ram = { kind = "ram", bandwidth_gbs = 45.0 }
eta_kv = 0.70
cpu_attention_k_us = 0.0
[anchor.provenance]
seed = "000_4a91008eeaefec79.txt"

[[anchor]]
id = "badinput.law4.agree"
law = "law4"
claim = "syn-25m-q4_0 decodes as fast as the law says."
quantity = "decode_ratio"
unit = "x"
kind = "agreement"
band = { rel = 0.25 }
profiles = ["cpu"]
case = { quantity = "decode_tok_s", calibrate = true, bench = { n_gen = 16, reps = 3, timeout_s = 120.0 } }
arms.a = { model = "gguf:syn-25m-q4_0" }
arms.b = { model = "gguf:syn-400m-f16" }
provenance = { seed = "000_4a91008eeaefec79.txt" }

[[anchor]]
id = "badinput.minfer.plane"
law = "minfer"
claim = "The plane is this many bytes."
quantity = "plane_bytes"
unit = "B"
kind = "prediction"
value = 1024
band = { rel = 0.01 }
case = { measure = "plane_bytes", timeout_s = 600.0, shapes = [{ name = "attn_v", count = 1, od = 4, id = 256 }] }
provenance = { seed = "002_73bfd6a23252a67a.txt" }
"""

class Shipped(typing.NamedTuple):
    site: Path
    anchors: str  # the anchor file's path as check names it
    profile: str


def ship(tmp_path: Path, anchors: str = ANCHORS, profile: str = PROFILE,
         more_anchors: typing.Optional[str] = None) -> Shipped:
    """The plugin distribution with these files, as pip leaves it in a site folder."""
    for text in (anchors, profile, more_anchors or ""):
        tomllib.loads(text)  # the defect is in the data, never in the TOML syntax
    more = {} if more_anchors is None else {"more.toml": more_anchors}
    pkg = carrier_plugin(tmp_path / "site", "badinput", {"bad.toml": anchors, **more},
                         profiles={"bad-input-box.toml": profile})
    site = pkg.parent
    return Shipped(site, str(pkg / "anchors" / "bad.toml"), str(pkg / "profiles" / "bad-input-box.toml"))


def lawbench(shipped: Shipped, cli_env: dict, tmp_path: Path, *args: str):
    return run_cli(list(args or ["check"]), dict(cli_env, PYTHONPATH=str(shipped.site)), tmp_path)


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} is not in the file exactly once"
    return text.replace(old, new)


def refused(p, file: str, field: str, anchor: typing.Optional[str] = None, words: str = "") -> str:
    """Exit 2, no traceback, and the last line names the file, the anchor and the field."""
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    line = p.stderr.strip().splitlines()[-1]
    where = f"lawbench: error: {file}: " + (f"anchor {anchor}: " if anchor else "") + f"field {field}: "
    assert line.startswith(where), line
    assert words in line, line
    return line


# --------------------------------------------------------------------------- the control


def test_the_unchanged_files_pass_check(tmp_path, cli_env):
    p = lawbench(ship(tmp_path), cli_env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("ok:"), p.stdout


# --------------------------------------------------------------------------- anchors: non-finite numbers

ANCHOR_DEFECTS = [
    # (what, old, new, anchor, field, words)
    ("NaN value", "value = 4.0", "value = nan", "badinput.reading", "value", "finite number"),
    ("inf value", "value = 4.0", "value = inf", "badinput.reading", "value", "finite number"),
    ("-inf value", "value = 4.0", "value = -inf", "badinput.reading", "value", "finite number"),
    ("abs = inf band: passes anything", "band = { abs = 0.5 }", "band = { abs = inf }", "badinput.reading",
     "band.abs", "finite number"),
    ("rel = nan band", "value = 3.0\nband = { rel = 0.05 }", "value = 3.0\nband = { rel = nan }", "badinput.old",
     "band.rel", "finite number"),
    ("explicit hi = inf: leave hi out instead", "band = { lo = 1.2, hi = 2.5 }", "band = { lo = 1.2, hi = inf }",
     "badinput.window", "band.hi", "finite number"),
    ("lo = nan", "band = { lo = 1.2, hi = 2.5 }", "band = { lo = nan, hi = 2.5 }", "badinput.window",
     "band.lo", "finite number"),
    ("budget timeout inf", "timeout_s = 60.0", "timeout_s = inf", "badinput.reading", "budget.timeout_s",
     "finite number"),
    ("budget confidence nan", "confidence = 0.95", "confidence = nan", "badinput.reading", "budget.confidence",
     "finite number"),
    ("census count nan", '"path.a" = 3', '"path.a" = nan', "badinput.census", "census.exact.path.a",
     "finite number"),
    ("negative census count", '"path.b" = 1', '"path.b" = -1', "badinput.census", "census.minimum.path.b",
     "greater than or equal to 0"),
]


@pytest.mark.parametrize("what,old,new,anchor,field,words", ANCHOR_DEFECTS, ids=[d[0] for d in ANCHOR_DEFECTS])
def test_a_number_no_anchor_may_hold(tmp_path, cli_env, what, old, new, anchor, field, words):
    shipped = ship(tmp_path, anchors=edit(ANCHORS, old, new))
    refused(lawbench(shipped, cli_env, tmp_path), shipped.anchors, field, anchor, words)


# --------------------------------------------------------------------------- anchors: case numbers (laws)

CASE_DEFECTS = [
    ("NaN Law 4 baseline", "baseline_tok_s = 8.0", "baseline_tok_s = nan", "badinput.law4.pure-cpu",
     "case.baseline_tok_s", "finite number"),
    ("inf Law 4 tier bandwidth", "bandwidth_gbs = 45.0", "bandwidth_gbs = inf", "badinput.law4.pure-cpu",
     "case.tiers.ram.bandwidth_gbs", "finite number"),
    ("NaN Law 4 eta_kv", "eta_kv = 0.70", "eta_kv = nan", "badinput.law4.pure-cpu", "case.eta_kv", "finite number"),
    ("inf Law 4 CPU-attention k", "cpu_attention_k_us = 0.0", "cpu_attention_k_us = inf", "badinput.law4.pure-cpu",
     "case.cpu_attention_k_us", "finite number"),
    ("inf Law 4 bench timeout", "timeout_s = 120.0", "timeout_s = inf", "badinput.law4.agree",
     "case.bench.timeout_s", "finite number"),
    ("inf minfer timeout", "timeout_s = 600.0", "timeout_s = inf", "badinput.minfer.plane", "case.timeout_s",
     "finite number"),
]


@pytest.mark.parametrize("what,old,new,anchor,field,words", CASE_DEFECTS, ids=[d[0] for d in CASE_DEFECTS])
def test_a_number_no_case_may_hold(tmp_path, cli_env, what, old, new, anchor, field, words):
    shipped = ship(tmp_path, anchors=edit(ANCHORS, old, new))
    refused(lawbench(shipped, cli_env, tmp_path), shipped.anchors, field, anchor, words)


def test_law4_case_models_refuse_nan_and_inf():
    """The case models themselves, as `predict` and the runner parse them."""
    from lawbench.core.errors import DataError
    from lawbench.plugins.law4.case import Law4Case, parse_case

    base = {"quantity": "decode_tok_s", "baseline_tok_s": 8.0}
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValidationError, match="finite number"):
            Law4Case.model_validate({**base, "tiers": {"ram": {"bandwidth_gbs": bad}}})
        with pytest.raises(DataError) as err:
            parse_case({**base, "measured_tok_s": bad}, "some.anchor")
        assert err.value.field == "case.measured_tok_s" and err.value.anchor == "some.anchor"


# --------------------------------------------------------------------------- anchors: lineage loops


def test_a_supersede_loop_of_two(tmp_path, cli_env):
    # reading -> old, old -> reading
    bad = edit(ANCHORS, 'status = "active"', 'status = "superseded"\nsuperseded_by = "badinput.old"')
    shipped = ship(tmp_path, anchors=bad)
    refused(lawbench(shipped, cli_env, tmp_path), shipped.anchors, "superseded_by", "badinput.reading",
            "loops: badinput.reading -superseded_by-> badinput.old -superseded_by-> badinput.reading;")


def test_a_lineage_loop_of_three_through_refuted_by(tmp_path, cli_env):
    # reading -refuted_by-> older -> old -> reading
    bad = edit(ANCHORS, 'status = "active"', 'status = "refuted"\nrefuted_by = "badinput.older"')
    shipped = ship(tmp_path, anchors=bad)
    refused(lawbench(shipped, cli_env, tmp_path), shipped.anchors, "refuted_by", "badinput.reading",
            "loops: badinput.reading -refuted_by-> badinput.older -superseded_by-> badinput.old "
            "-superseded_by-> badinput.reading;")


def test_a_lineage_loop_across_two_files_names_both(tmp_path, cli_env):
    more = edit(ANCHORS.split("[[anchor]]")[1], 'id = "badinput.reading"', 'id = "badinput.newest"')
    more = "[[anchor]]" + edit(more, 'status = "active"', 'status = "superseded"\nsuperseded_by = "badinput.older"')
    bad = edit(ANCHORS, 'status = "active"', 'status = "superseded"\nsuperseded_by = "badinput.newest"')
    shipped = ship(tmp_path, anchors=bad, more_anchors=more)
    line = refused(lawbench(shipped, cli_env, tmp_path), shipped.anchors, "superseded_by", "badinput.reading",
                   "-superseded_by-> badinput.newest -superseded_by-> badinput.older")
    assert str(Path(shipped.anchors).with_name("more.toml")) in line


def test_a_chain_that_ends_is_not_a_loop(tmp_path, cli_env):
    """older -> old -> reading, and a second branch into the same chain: no loop, ok."""
    more = "[[anchor]]" + edit(ANCHORS.split("[[anchor]]")[3], 'id = "badinput.older"', 'id = "badinput.branch"')
    p = lawbench(ship(tmp_path, more_anchors=more), cli_env, tmp_path)
    assert p.returncode == 0, p.stderr


# --------------------------------------------------------------------------- hardware profiles

PROFILE_DEFECTS = [
    # (what, old, new, field, words)
    ("zero bandwidth", "value = 48.0", "value = 0", "tiers.0.bandwidth_spec_gbs.value",
     "tier 'ram': a bandwidth is above 0 GB/s (got 0)"),
    ("negative bandwidth", "value = 26.1", "value = -26.1", "tiers.0.bandwidth_measured_gbs.value",
     "a bandwidth is above 0 GB/s (got -26.1)"),
    ("inf bandwidth", "value = 48.0", "value = inf", "tiers.0.bandwidth_spec_gbs.value", "finite number"),
    ("NaN bandwidth", "value = 26.1", "value = nan", "tiers.0.bandwidth_measured_gbs.value", "finite number"),
    ("zero capacity", "value = 16.0", "value = 0", "tiers.0.capacity_gb.value", "a capacity is above 0 GB"),
    ("eta above 1.5", "value = 0.65", "value = 2.0", "laws.law4.eta.ram.value", "at most 1.5 (got 2)"),
    ("eta zero", "value = 0.65", "value = 0", "laws.law4.eta.ram.value", "above 0"),
    ("eta negative per format", "value = 0.61", "value = -0.61", "laws.law4.eta_format.ram.Q4_0.value", "above 0"),
    ("eta_kv constant above 1.5", "value = 0.70", "value = 7.0", "laws.law4.constants.eta_kv.value", "at most 1.5"),
    ("NaN eta", "value = 0.65", "value = nan", "laws.law4.eta.ram.value", "finite number"),
    ("negative CPU-attention k", "value = 1.55", "value = -1.55", "laws.law4.constants.cpu_attention_k_us.value",
     "0 µs or more"),
    ("zero bandwidth constant", "value = 12.2", "value = 0", "laws.law4.constants.pcie_bandwidth_gbs.value",
     "a bandwidth is above 0 GB/s"),
    ("efficiency above 1.5", "value = 0.85", "value = 85", "laws.law4.constants.tensor_parallel_efficiency.value",
     "at most 1.5"),
    ("ram_gb_min above ram_gb_max", "ram_gb_min = 14.0", "ram_gb_min = 20.0", "fingerprint.ram_gb_min",
     "20 GiB is above ram_gb_max 17 GiB"),
    ("negative ram_gb_max", "ram_gb_max = 17.0", "ram_gb_max = -17.0", "fingerprint.ram_gb_max",
     "greater than 0"),
    ("NaN ram_gb_min", "ram_gb_min = 14.0", "ram_gb_min = nan", "fingerprint.ram_gb_min", "finite number"),
    ("negative threads", "threads = 4", "threads = -4", "threads",
     'threads is a count from 1 to 4096, or "all-but-one" (got -4)'),
    ("zero threads", "threads = 4", "threads = 0", "threads", "a count from 1 to 4096"),
    ("compute capability not major.minor", 'compute_capability = "6.1"', 'compute_capability = "61"',
     "fingerprint.compute_capability", '"major.minor"'),
]


@pytest.mark.parametrize("what,old,new,field,words", PROFILE_DEFECTS, ids=[d[0] for d in PROFILE_DEFECTS])
def test_a_number_no_profile_may_hold(tmp_path, cli_env, what, old, new, field, words):
    shipped = ship(tmp_path, profile=edit(PROFILE, old, new))
    refused(lawbench(shipped, cli_env, tmp_path), shipped.profile, field, words=words)


def test_predict_on_a_zero_bandwidth_profile_is_exit_2_not_a_division_by_zero(tmp_path, cli_env):
    shipped = ship(tmp_path, profile=edit(PROFILE, "value = 48.0", "value = 0"))
    p = lawbench(shipped, cli_env, tmp_path, "predict", "manifest:qwen3-30b-a3b", "--profile", "bad-input-box",
                 "--json")
    # Outside `check` a plugin's bad profile is set aside with a warning naming the file and the
    # field, so asking for it is an unknown profile: exit 2 either way, never a division by zero.
    assert p.returncode == 2 and "Traceback" not in p.stderr
    warning = next(line for line in p.stderr.splitlines() if "broken plugin" in line)
    assert f"{shipped.profile}: field tiers.0.bandwidth_spec_gbs.value" in warning and "above 0 GB/s" in warning
    assert "unknown profile 'bad-input-box'" in p.stderr.strip().splitlines()[-1]
    assert "ZeroDivisionError" not in p.stderr and p.stdout == ""


# --------------------------------------------------------------------------- every float of a data file


def _data_models():
    from lawbench.core import models
    from lawbench.plugins.law4.bench_case import BenchCase
    from lawbench.plugins.law4.case import Law4Case, TierOverride
    from lawbench.plugins.minfer.case import Case as MinferCase

    anchor = tomllib.loads(ANCHORS)["anchor"][0]
    return [  # (model, a valid input it is checked from)
        (models.Fact, {"value": 1.0, "source": "s"}),
        (models.Fingerprint, {}),
        (models.Band, {"abs": 1.0}),
        (models.Budget, {}),
        (models.Anchor, anchor),
        (TierOverride, {}),
        (BenchCase, {}),
        (Law4Case, {"quantity": "decode_tok_s", "baseline_tok_s": 8.0}),
        (MinferCase, {}),
    ]


def _float_fields(model) -> list[str]:
    return [name for name, f in model.model_fields.items() if "float" in str(f.annotation)]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_every_float_a_data_file_gives_is_finite(bad):
    """A new float field that forgets FiniteFloat fails here, not in a user's `check`."""
    checked = 0
    for model, valid in _data_models():
        model.model_validate(valid)
        for name in _float_fields(model):
            # a mapping of floats (Law 4's published population) is checked through one of its values
            value = {"a": bad, "b": 1.0} if "dict[" in str(model.model_fields[name].annotation) else bad
            with pytest.raises(ValidationError) as err:
                model.model_validate({**valid, name: value})
            assert any(e["loc"][:1] == (name,) and e["type"] == "finite_number" for e in err.value.errors()), \
                f"{model.__name__}.{name} = {bad}: {err.value.errors()}"
            checked += 1
    assert checked >= 22  # the walk really found the data files' floats
