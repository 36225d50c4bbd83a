"""Contribution bundles: written by a real `lawbench run --contribute`, checked and imported."""
from __future__ import annotations

import json

import pytest
from conftest import run_cli

from lawbench.core.record.contribute import ContributionBundle, machine_terms, read_bundle
from lawbench.core.errors import DataError
from lawbench.core.history.store import History
from lawbench.core.history.imports import import_paths
from lawbench.core.models import Measurement, Result, Sample, Verdict
from lawbench.core.record.reports import RunRecord


@pytest.fixture(scope="module")
def bundle_run(tmp_path_factory, dummy_site):
    """One real run of the dummy law with --contribute, and its bundle's JSON."""
    import os

    base = tmp_path_factory.mktemp("contrib")
    env = dict(os.environ, PYTHONPATH=str(dummy_site), LAWBENCH_CACHE=str(base / "cache"),
               LAWBENCH_CONTRIBUTOR="octocat")
    env.pop("LAWBENCH_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("GITHUB_STEP_SUMMARY", None)
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", "out", "--contribute",
                 "out/bundle.json"], env, base)
    assert p.returncode == 1, p.stdout + p.stderr  # the dummy law's FAIL and VOID, not the bundle
    assert "contribution bundle: out/bundle.json" in p.stdout
    return base


def test_bundle_carries_fingerprint_profile_and_the_record(bundle_run):
    text = (bundle_run / "out" / "bundle.json").read_text(encoding="utf-8")
    bundle = read_bundle(text, "bundle.json")
    record = RunRecord.model_validate_json((bundle_run / "out" / "run.json").read_text(encoding="utf-8"))
    assert bundle.record == record and bundle.fingerprint == record.machine
    assert bundle.profile.id == "cpu" and bundle.contributor == "octocat"
    assert bundle.bundle_version == 1 and bundle.lawbench_version == record.lawbench_version
    assert bundle.machine_terms == []  # the dummy law calibrates nothing


def test_import_accepts_a_bundle_with_its_provenance(bundle_run, tmp_path):
    path = bundle_run / "out" / "bundle.json"
    with History(tmp_path / "h.sqlite") as h:
        (o,) = import_paths(h, [str(path)])
        assert (o.status, o.kind) == ("imported", "contribution")
        p = h.provenance(o.run_id)
        bundle = ContributionBundle.model_validate_json(path.read_text(encoding="utf-8"))
        assert (p.kind, p.source, p.contributor) == ("contribution", str(path), "octocat")
        assert (p.bundle_created, p.bundle_lawbench_version) == (bundle.created, bundle.lawbench_version)
        (again,) = import_paths(h, [str(path), ])
        assert again.status == "already"


def tamper(bundle_run, tmp_path, change) -> str:
    data = json.loads((bundle_run / "out" / "bundle.json").read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("change, field, says", [
    (lambda d: d["fingerprint"].update(hostname="elsewhere"), "fingerprint", "differs from the bundle's"),
    (lambda d: d["record"].update(finished=None), "record.finished", "unfinished"),
    (lambda d: d["profile"].update(id="gtx1060"), "profile.id", "carries profile 'gtx1060'"),
    (lambda d: d.update(bundle_version=9), "bundle_version", "Input should be 1"),
    (lambda d: d.update(signed_by="me"), "signed_by", "unknown field"),
    (lambda d: d.pop("record"), "record", "Field required"),
    (lambda d: d["profile"]["tiers"][0].update(name=None), "profile.tiers.0.name", ""),
])
def test_a_bad_bundle_is_one_line_naming_the_field(bundle_run, tmp_path, change, field, says):
    path = tamper(bundle_run, tmp_path, change)
    with History(tmp_path / "h.sqlite") as h:
        (o,) = import_paths(h, [path])
        assert o.status == "refused" and "\n" not in o.message
        assert o.message.startswith(f"{path}: field {field}: ") and says in o.message
        assert h.runs() == []


def test_contribute_to_a_folder_is_refused_before_running(cli_env, tmp_path):
    (tmp_path / "somewhere").mkdir()
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", "out", "--contribute", "somewhere"],
                cli_env, tmp_path)
    assert p.returncode == 2 and "cannot write the --contribute bundle somewhere: it is a folder" in p.stderr
    assert not (tmp_path / "out" / "run.json").exists()


def test_machine_terms_use_the_law_s_own_calibration():
    """The η·BW in a bundle is the rate the law calibrates on arm b: pricing arm a at that rate
    gives exactly the law's from_reference prediction for the same round."""
    from lawbench.plugins.law4.law import Law4

    def arm(weights: float, kv: float, cpu_attention: float = 0.0) -> dict:
        seconds = {"weights@ram": weights, "kv@ram": kv}
        if cpu_attention:
            seconds["cpu_attention"] = cpu_attention
        return {"pricing": {"seconds": seconds, "weight_bytes": {"ram": weights * 1e9}}}

    detail = {"arm_a": arm(0.0966, 0.0002), "arm_b": arm(0.742, 0.0002, cpu_attention=0.001)}
    prediction = Law4._calibrated(detail, scale=1.0)
    rounds = [37.79, 36.15, 36.69]
    result = Result(anchor_id="law4.cpu.agree.x", law="law4", kind="agreement", profile="cpu",
                    verdict=Verdict.PASS, detail={"prediction": prediction.detail, "calibrated_on": "arm b"},
                    measurement=Measurement(samples=[Sample(value=1.0, raw={"value_a": 100.0, "value_b": b})
                                                     for b in rounds]))
    (term,) = machine_terms(RunRecord(profile="cpu").finish([result]))
    assert (term.term, term.tiers, term.unit, len(term.samples)) == ("eta_bw_gbs", ["ram"], "GB/s", 3)
    s_a, f_a = 0.0966 + 0.0002, 0.0
    for c, b in zip(term.samples, rounds):
        assert 1 / (s_a / c + f_a) == pytest.approx(prediction.from_reference(b), rel=1e-12)
    assert term.value == sorted(term.samples)[1]
    plain = result.model_copy(update={"detail": {}})
    assert machine_terms(RunRecord(profile="cpu").finish([plain])) == []


def test_read_bundle_refuses_a_record_from_another_machine_even_when_valid():
    record = RunRecord(profile="cpu", machine={"hostname": "a"}).finish([])
    from lawbench.core.hardware.profiles import load_profiles

    bundle = ContributionBundle(fingerprint={"hostname": "b"}, profile=load_profiles()["cpu"], record=record)
    with pytest.raises(DataError, match="field fingerprint"):
        read_bundle(bundle.model_dump_json(), "x.json")
