"""Issue 33: the notes core writes and reads back are typed fields on Result, not `detail` keys,
and every record committed under results/ still imports."""
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from lawbench.core.models.result import Result
from lawbench.core.models.run_record import RunRecord

ROOT = Path(__file__).resolve().parents[1]
RECORDS = sorted(p for p in (ROOT / "results").rglob("*.json")
                 if isinstance(json.loads(p.read_text(encoding="utf-8")), dict) and "results" in json.loads(p.read_text(encoding="utf-8"))
                 and "schema_version" in json.loads(p.read_text(encoding="utf-8")))


def test_there_are_committed_records_to_import():
    assert len(RECORDS) >= 5, [str(p) for p in RECORDS]


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_record_imports(path):
    record = RunRecord.model_validate_json(path.read_text(encoding="utf-8"))
    assert record.results, path


def test_an_old_record_s_detail_notes_move_to_the_typed_fields():
    raw = json.loads(RECORDS[0].read_text(encoding="utf-8"))
    r = raw["results"][0]
    r["detail"] = {**r.get("detail", {}), "expected_void": "register C-34 scored it VOID",
                   "print_limited": "the register publishes no prompt", "law_own": 1}
    result = RunRecord.model_validate(raw).results[0]
    assert (result.expected_void, result.print_limited) == ("register C-34 scored it VOID",
                                                            "the register publishes no prompt")
    assert "expected_void" not in result.detail and "print_limited" not in result.detail
    assert result.detail["law_own"] == 1  # the law's own data stays where it was
    again = Result.model_validate_json(result.model_dump_json())  # and round-trips as fields
    assert again == result


def test_a_misspelt_note_is_refused_not_kept():
    with pytest.raises(ValidationError, match="expected_voids"):
        Result(anchor_id="a", law="law4", kind="measurement", profile="box", verdict="PASS",
               expected_voids="typo")
