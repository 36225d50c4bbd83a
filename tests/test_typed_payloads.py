"""Issue 33: core's decisions and the ab / plant payloads are typed Result fields; old records' detail
keys are lifted into them on read, and core reads no result's `detail` by key."""
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from lawbench.core.models.result import Result
from lawbench.core.models.run_record import is_retired

ROOT = Path(__file__).resolve().parents[1]
BASE = dict(anchor_id="a.b", law="law4", profile="box", verdict="SKIP")


def test_an_old_retired_anchor_is_lifted_with_its_successor():
    r = Result(**BASE, kind="measurement", detail={"history": True, "status": "superseded",
                                                   "superseded_by": "a.c", "law_own": 1})
    assert (r.retired, r.retired_by, r.detail) == ("superseded", "a.c", {"law_own": 1})
    assert is_retired(r)
    assert not is_retired(Result(**BASE, kind="measurement", detail={"status": "whatever the law says"}))


def test_an_old_census_s_counts_are_lifted_only_on_a_census():
    r = Result(**BASE, kind="census", detail={"counts": {"mmq:q4_0": 27, "gpu_peak_mib": 1.5},
                                              "judged": {"mmq:q4_0": 27}})
    assert r.census_counts == {"mmq:q4_0": 27, "gpu_peak_mib": 1.5} and r.census_judged == {"mmq:q4_0": 27}
    assert isinstance(r.census_counts["mmq:q4_0"], int) and r.detail == {}
    law_own = Result(**BASE, kind="measurement", detail={"counts": {"x": 1}})
    assert law_own.census_counts is None and law_own.detail == {"counts": {"x": 1}}


def test_old_ab_and_plant_payloads_and_listed_only_are_lifted():
    ab = Result(**BASE, kind="ratio", detail={"ab": {"status": "measured", "pairs": 3, "ratios": [1.0, 1.1, 0.9]}})
    assert ab.ab is not None and ab.ab.pairs == 3 and ab.detail == {}
    plant = Result(**BASE, kind="census", detail={"listed_only": True, "plant": {"file": "f.toml", "proved": False,
                                                                              "no_faults": True}})
    assert plant.listed_only and plant.plant is not None and plant.plant.no_faults and plant.detail == {}
    again = Result.model_validate_json(plant.model_dump_json())
    assert again == plant


def test_an_old_records_scope_skip_is_lifted_into_out_of_scope():
    """Records written before Result.out_of_scope kept only the law's figures in detail.out_of_scope;
    the gate reads the typed field, so an accepted night from before still says it was out of scope."""
    old = Result(**{**BASE, "verdict": "SKIP"}, kind="ratio", reason="fits in the cache",
                 detail={"out_of_scope": {"a": {"fixed_share": 0.4}}})
    assert old.out_of_scope == "fits in the cache" and old.detail == {"out_of_scope": {"a": {"fixed_share": 0.4}}}
    other = Result(**{**BASE, "verdict": "SKIP"}, kind="ratio", reason="no GPU", detail={"scope": 1})
    assert other.out_of_scope is None


def test_a_misspelt_payload_field_is_refused():
    with pytest.raises(ValidationError, match="pairz"):
        Result(**BASE, kind="ratio", ab={"status": "measured", "pairz": 3})
    with pytest.raises(ValidationError, match="listed_onyl"):
        Result(**BASE, kind="census", listed_only=True, listed_onyl=True)


READS = re.compile(r"""detail\.get\(\s*["'f]|detail\[\s*f?["'][^]]*\](?!\s*=[^=])|json_extract\([^)]*\$\.detail""")


def test_core_reads_no_result_detail_by_key():
    """The before-stop hook's check, as a test: a decision core takes is a typed field. The one
    json_extract left reads a schema-3 row's sampling (docs/run-record.md) and is named here."""
    found = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if READS.search(line) and "'$.detail.interval" not in line:
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []


def test_the_read_pattern_finds_what_it_must():
    for line in ('x = r.detail.get("counts")', "r.detail['ab']['status']", "json_extract(j, '$.detail.ab')"):
        assert READS.search(line), line
    assert not READS.search('detail["calibrated_on"] = "arm b"')  # a law's note written, not read
