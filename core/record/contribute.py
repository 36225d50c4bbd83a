"""Contribution bundles: one run on someone else's hardware, packed to be sent back and imported.

`lawbench run --contribute PATH` writes, after the run record, one JSON file: the machine
fingerprint, the hardware profile as used, the machine terms the run measured (see
`machine_terms`), and the whole run record. `lawbench history import` recognises it by its
`bundle_version` and checks it before the record goes into the history with the bundle's
provenance. docs/history.md describes the fields.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import Field, ValidationError

from lawbench.core.errors import DataError, UsageError, validation_error
from lawbench.core.laws.law import MachineTerm
from lawbench.core.models import HardwareProfile
from lawbench.core.models.base import Strict
from lawbench.core.record.reports import RunRecord, lawbench_version, utc_now, write_json

BUNDLE_VERSION = 1
CONTRIBUTOR_ENV = "LAWBENCH_CONTRIBUTOR"  # who sends the bundle (a GitHub handle): optional


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
    """The machine terms the run measured, as each result's own law reads them (``Law.machine_terms``:
    e.g. an effective bandwidth per interleaved round). A law that is not installed here, or whose
    reading breaks, gives none: the bundle is written without them and says nothing false."""
    from lawbench.core.laws.registry import get_registry

    laws = get_registry().laws
    terms: list[MachineTerm] = []
    for r in record.results:
        law = laws.get(r.law)
        if law is None:
            continue
        try:
            terms.extend(law.machine_terms(r))
        except Exception as exc:  # noqa: BLE001 - a plugin's bug must not lose the bundle
            print(f"lawbench: warning: law {r.law!r} could not read the machine terms of {r.anchor_id}: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)
    return terms


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
