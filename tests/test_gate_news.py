"""Issue 30, items 5 and 7: a skip where the anchor ran is news (red on a deployed runner under
--strict, with the skip's reason; a scope decision that changed is said), an anchor flapping
between resolved and VOID is red, and every anchor of the accepted night gone tonight is named
with why. Real RunRecords judged by the real gate against a real SQLite history
(tests/test_gate.py's helpers); the retired-anchor rule through the real anchor loader."""
from __future__ import annotations

import pytest

RETIRED = "law4.always-active-share.qwen3.6-35b-a3b.k1"
SUCCESSOR = "law4.l30.active-bytes-still-read.qwen3.6-35b-a3b.k1"


# --------------------------------------------------------------------------- retired needs a reason


def _shipped_with(tmp_path, old: str, new: str):
    """anchors/law4/predictions.toml with one edit, written to tmp_path (the edit must apply)."""
    src = open("anchors/law4/predictions.toml").read()
    cut = src.replace(old, new, 1)
    assert cut != src, old
    f = tmp_path / "predictions.toml"
    f.write_text(cut)
    return f


def test_check_refuses_an_anchor_retired_without_a_reason_naming_file_anchor_and_field(tmp_path):
    """`lawbench check` loads every anchor file through load_anchor_file: a retired anchor without
    retired_reason is refused in one line naming the file, the anchor and the field."""
    from lawbench.core.claims.loading import load_anchor_file
    from lawbench.core.errors import DataError

    f = _shipped_with(tmp_path, 'retired_reason = "issue 9', '# retired_reason = "issue 9')
    with pytest.raises(DataError) as exc:
        load_anchor_file(f)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(str(f)), msg
    assert RETIRED in msg and "field retired_reason" in msg, msg
    shipped = {la.anchor.id: la.anchor for la in load_anchor_file("anchors/law4/predictions.toml")}
    assert shipped[RETIRED].successor == SUCCESSOR  # the shipped file gives its reason and successor


def test_only_a_retired_anchor_gives_a_retired_reason(tmp_path):
    from lawbench.core.claims.loading import load_anchor_file
    from lawbench.core.errors import DataError

    f = _shipped_with(tmp_path, 'status = "retired"\nretired_reason', 'status = "active"\nretired_reason')
    with pytest.raises(DataError, match="only an anchor with status 'retired' gives retired_reason"):
        load_anchor_file(f)


def test_a_retired_by_that_names_no_anchor_is_refused_and_a_real_one_reaches_the_result(tmp_path):
    from lawbench.core.claims.loading import load_anchors
    from lawbench.core.errors import DataError
    from lawbench.core.models import Verdict
    from lawbench.core.run.evaluate import retired_result

    f = _shipped_with(tmp_path, f'retired_by = "{SUCCESSOR}"', 'retired_by = "law4.no-such-anchor"')
    with pytest.raises(DataError) as exc:
        load_anchors([f], laws=["law4"])
    assert "law4.no-such-anchor" in str(exc.value) and "field retired_by" in str(exc.value)
    [la] = [la for la in load_anchors(["anchors/law4/predictions.toml"], laws=["law4"]).anchors
            if la.anchor.id == RETIRED]
    r = retired_result(la.anchor, "cpu")
    assert (r.verdict, r.retired, r.retired_by) == (Verdict.SKIP, "retired", SUCCESSOR)
