"""Contribution bundles: one run on someone else's hardware, packed to be sent back and imported.

`lawbench run --contribute PATH` writes, after the run record, one JSON file: the machine
fingerprint, the hardware profile as used, the machine terms the run measured (see
`machine_terms`), and the whole run record. `lawbench history import` recognises it by its
`bundle_version` and checks it before the record goes into the history with the bundle's
provenance. docs/history.md describes the fields.
"""
from __future__ import annotations

import math
import os
import statistics
import sys
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import Field, ValidationError

from lawbench.core.errors import DataError, UsageError, validation_error
from lawbench.core.models import HardwareProfile, Result
from lawbench.core.models.base import Strict
from lawbench.core.reports import RunRecord, lawbench_version, utc_now, write_json

BUNDLE_VERSION = 1
CONTRIBUTOR_ENV = "LAWBENCH_CONTRIBUTOR"  # who sends the bundle (a GitHub handle): optional


class MachineTerm(Strict):
    """One machine term a run measured: what the law's prediction needed from this machine."""

    anchor_id: str  # the anchor whose samples gave it
    term: str  # e.g. "eta_bw_gbs": the effective read rate η·BW of the tiers named in `tiers`
    tiers: list[str]
    value: float  # the median over the samples
    unit: str
    samples: list[float] = Field(default_factory=list)  # one per interleaved round
    how: str  # in one line


class ContributionBundle(Strict):
    bundle_version: Literal[1] = BUNDLE_VERSION
    created: str = Field(default_factory=utc_now)
    lawbench_version: str = Field(default_factory=lawbench_version)
    contributor: Optional[str] = None
    fingerprint: dict[str, Any]  # the machine, as the record's `machine`
    profile: HardwareProfile  # the profile the run was judged against, as loaded
    machine_terms: list[MachineTerm] = Field(default_factory=list)
    record: RunRecord


def machine_terms(record: RunRecord) -> list[MachineTerm]:
    """The effective η·BW each calibrated agreement anchor measured, per interleaved round.

    Such an anchor prices its reference arm b at 1 GB/s (`detail.prediction.bytes_per_token_b`:
    its byte-seconds at that rate ×1e9; `.fixed_seconds_b`: its compute seconds) and runs it beside arm a; arm b's
    measured tok/s in round i then gives the rate c_i = S_b / (1 / tok_s_b,i − F_b) in GB/s (the
    same c the law uses to predict arm a). Rounds whose arm-b token is shorter than F_b give none.
    """
    return [t for r in record.results if (t := _eta_bw(r)) is not None]


def _eta_bw(r: Result) -> Optional[MachineTerm]:
    d = r.detail.get("prediction")
    if not (isinstance(d, dict) and r.detail.get("calibrated_on") and r.measurement):
        return None
    s_b, f_b = d.get("bytes_per_token_b"), d.get("fixed_seconds_b", 0.0)
    if not (isinstance(s_b, (int, float)) and isinstance(f_b, (int, float))):
        return None
    rates = []
    for sample in r.measurement.samples:
        tok_s = sample.raw.get("value_b")
        if isinstance(tok_s, (int, float)) and tok_s > 0 and 1 / tok_s > f_b:
            rates.append(s_b / 1e9 / (1 / tok_s - f_b))
    rates = [c for c in rates if math.isfinite(c)]
    if not rates:
        return None
    pricing = (d.get("arm_b") or {}).get("pricing", {})
    tiers = sorted(pricing.get("weight_bytes", {})) or ["all"]
    return MachineTerm(anchor_id=r.anchor_id, term="eta_bw_gbs", tiers=tiers,
                       value=statistics.median(rates), unit="GB/s", samples=rates,
                       how="arm b's bytes per token over its measured token time, per round")


def build_bundle(record: RunRecord, profile: HardwareProfile) -> ContributionBundle:
    return ContributionBundle(contributor=os.environ.get(CONTRIBUTOR_ENV) or None,
                              fingerprint=dict(record.machine), profile=profile,
                              machine_terms=machine_terms(record), record=record)


def check_bundle_path(path: Union[str, Path]) -> Path:
    """Refuse before measuring when the bundle could not be written (exit 2, one line)."""
    from lawbench.core.paths import writable_dir

    if not str(path).strip():
        raise UsageError("--contribute needs a file path (an unset shell variable?), e.g. contribution.json")
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"cannot write the --contribute bundle {path}: it is a folder; give a "
                         "file path such as contribution.json")
    writable_dir(path.parent, f"--contribute bundle {path}: its folder", fix="give a writable path")
    return path


def write_bundle(record: RunRecord, profile: HardwareProfile, path: Union[str, Path]) -> Path:
    """Write the bundle atomically (the run record's own writer)."""
    return write_json(build_bundle(record, profile), path)  # type: ignore[arg-type]


def is_bundle(data: Any) -> bool:
    return isinstance(data, dict) and "bundle_version" in data


def read_bundle(text: Union[str, bytes], path: str) -> ContributionBundle:
    """Validate a bundle: its schema, a finished record, and a record that belongs to it.

    :raises DataError: one line naming the file and the field.
    """
    try:
        bundle = ContributionBundle.model_validate_json(text)
    except ValidationError as exc:
        raise validation_error(path, exc) from None
    record = bundle.record
    if record.finished is None or record.exit_code is None:
        raise DataError(path, f"run {record.run_id} is unfinished (finished is null); bundle a "
                        "run that ran to its end", field="record.finished")
    if record.machine != bundle.fingerprint:
        raise DataError(path, "the record's machine differs from the bundle's fingerprint: the "
                        "record was not measured on the machine the bundle names; write the "
                        "bundle again with `lawbench run --contribute`", field="fingerprint")
    if record.profile != bundle.profile.id:
        raise DataError(path, f"the record ran on profile {record.profile!r} but the bundle "
                        f"carries profile {bundle.profile.id!r}", field="profile.id")
    return bundle


def contribute_after_run(record: Optional[RunRecord], profile: HardwareProfile,
                         path: Union[str, Path]) -> int:
    """`lawbench run --contribute`: write the bundle and say where; 0, or 1 when it could not."""
    if record is None:
        print("lawbench: error: no run record was made, so no contribution bundle was written",
              file=sys.stderr)
        return 1
    try:
        written = write_bundle(record, profile, path)
    except OSError as exc:
        print(f"lawbench: error: cannot write the contribution bundle {path}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"contribution bundle: {written} (attach it to a 'Contribution' issue)")
    return 0
