"""The data model: hardware profiles, anchors, measurements and verdicts.

TOML is the source of truth for anchors and profiles; these pydantic models are its schema
(`lawbench schema` exports them as JSON Schema for editors). Every model forbids unknown fields so
a typo in a data file is an error that names the field, never a silently ignored key.
"""
from lawbench.core.models.anchor import (
                                         Anchor,
                                         AnchorFile,
                                         AnchorKind,
                                         Band,
                                         Budget,
                                         CensusSpec,
                                         Provenance,
)
from lawbench.core.models.base import ID_RE, FiniteFloat, Id, Strict
from lawbench.core.models.profile import EngineOfRecord, Fact, Fingerprint, HardwareProfile, Noise, Tier
from lawbench.core.models.result import Measurement, RateSample, RateSeries, Result, Sample, Verdict

__all__ = ["Anchor", "AnchorFile", "AnchorKind", "Band", "Budget", "CensusSpec", "EngineOfRecord", "Fact",
           "FiniteFloat", "Fingerprint", "HardwareProfile", "ID_RE", "Id", "Measurement", "Noise", "Provenance",
           "RateSample", "RateSeries", "Result", "Sample", "Strict", "Tier", "Verdict"]
