import pytest
from pydantic import ValidationError

from lawbench.core.errors import DataError
from lawbench.core.claims.loading import load_anchor_file, load_anchors
from lawbench.core.models import Band
from lawbench.testing import make_anchor

GOOD = """
[[anchor]]
id = "t.one"
law = "law4"
claim = "c"
quantity = "q"
unit = "B"
kind = "prediction"
value = 1.0
band = { rel = 0.01 }
provenance = { seed = "000_4a91008eeaefec79.txt" }
"""


def write(tmp_path, text, name="a.toml"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_band_forms():
    assert Band(abs=1).interval(10) == (9, 11)
    assert Band(rel=0.1).interval(10) == pytest.approx((9, 11))
    assert Band(lo=1, hi=2).interval(None) == (1, 2)
    with pytest.raises(ValidationError):
        Band(abs=1, rel=0.1)
    with pytest.raises(ValidationError):
        Band()
    with pytest.raises(ValidationError):
        Band(lo=3, hi=2)


def test_anchor_kind_requirements():
    with pytest.raises(ValidationError, match="census"):
        make_anchor(kind="census", band=None)
    with pytest.raises(ValidationError, match="arms"):
        make_anchor(kind="ratio")
    with pytest.raises(ValidationError, match="superseded_by"):
        make_anchor(status="superseded")
    with pytest.raises(ValidationError):
        make_anchor(id="Bad Id")
    assert make_anchor(kind="agreement", value=None, band={"rel": 0.1}).band_interval() == pytest.approx((0.9, 1.1))


def test_good_file_loads(tmp_path):
    [la] = load_anchor_file(write(tmp_path, GOOD))
    assert la.anchor.id == "t.one" and la.file.endswith("a.toml")


def test_malformed_toml_names_the_file(tmp_path):
    p = write(tmp_path, GOOD + "\n[[anchor]\n")
    with pytest.raises(DataError) as ei:
        load_anchor_file(p)
    assert str(p) in str(ei.value) and "malformed TOML" in str(ei.value)


def test_unknown_field_names_file_anchor_and_field(tmp_path):
    p = write(tmp_path, GOOD.replace("unit = \"B\"", "unit = \"B\"\nunits = \"x\""))
    with pytest.raises(DataError) as ei:
        load_anchor_file(p)
    e = ei.value
    assert (e.anchor, e.field) == ("t.one", "units")
    assert str(e) == f"{p}: anchor t.one: field units: unknown field (check the spelling; see `lawbench schema`)"


def test_bad_band_field(tmp_path):
    p = write(tmp_path, GOOD.replace("band = { rel = 0.01 }", "band = { rel = \"tight\" }"))
    with pytest.raises(DataError) as ei:
        load_anchor_file(p)
    assert ei.value.field == "band.rel"


def test_cross_file_checks(tmp_path):
    a = write(tmp_path, GOOD, "a.toml")
    b = write(tmp_path, GOOD, "b.toml")
    with pytest.raises(DataError, match="duplicate anchor id"):
        load_anchors([a, b])
    c = write(tmp_path, GOOD.replace('kind = "prediction"', 'kind = "prediction"\nprofiles = ["gtx9999"]'), "c.toml")
    with pytest.raises(DataError) as ei:
        load_anchors([c], profiles=["cpu", "gtx1060"])
    assert ei.value.field == "profiles.0" and "gtx9999" in str(ei.value)
    d = write(tmp_path, GOOD.replace('kind = "prediction"',
                                     'kind = "prediction"\nstatus = "superseded"\nsuperseded_by = "t.nowhere"'), "d.toml")
    with pytest.raises(DataError) as ei:
        load_anchors([d])
    assert ei.value.field == "superseded_by"
    with pytest.raises(DataError) as ei:
        load_anchors([a], laws=["law1"])
    assert ei.value.field == "law"


def test_shipped_anchors_and_profiles_validate():
    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.core.claims.loading import load_all
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    profiles = load_profiles(extra_dirs=reg.profile_dirs)
    anchors = load_all(reg, profiles=profiles.keys())
    assert len(anchors.anchors) > 0
    for la in anchors.anchors:
        pv = la.anchor.provenance
        assert pv.seed or pv.register_id or pv.document
