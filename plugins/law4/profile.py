"""Law 4's table in a hardware profile (``[laws.law4]``): η per tier and per weight format, and the
law's constants of the machine (the KV η, the CPU-attention k, the tiers' reserves …).

Core validates the table with ``Law4.profile_model`` when the profile loads, handing it the profile,
so the rules that need the tiers live here: an η names a tier the profile has, and the bandwidth of
its basis is one that tier states. Law 4's code reads the table through ``law4_profile`` only.
"""
from __future__ import annotations

from typing import Callable, Literal, Optional

from pydantic import Field, ValidationError, ValidationInfo, model_validator

from lawbench import Fact, HardwareProfile, Strict, validation_error

# An η is a fraction of its tier's bandwidth; on a spec figure the part beats it may pass 1, and
# Law 4's case takes up to 1.5 (plugins/law4/case.py). Beyond that the number is a typo.
ETA_MAX = 1.5


# Constants whose name says what they are: (name test, range test, the rule in words).
CONSTANT_RANGES: tuple[tuple[Callable[[str], bool], Callable[[float], bool], str], ...] = (
    (lambda k: k.endswith("_gbs"), lambda v: v > 0, "a bandwidth is above 0 GB/s"),
    (lambda k: k.endswith("_tflops"), lambda v: v > 0, "a compute peak is above 0 TFLOPS"),
    (lambda k: k.endswith("_efficiency"), lambda v: 0 < v <= ETA_MAX,
     f"an efficiency is above 0 and at most {ETA_MAX:g}"),
    (lambda k: k.startswith("cpu_attention_k_us"), lambda v: v >= 0,
     "the CPU-attention k is 0 µs or more (0: no CPU-attention term)"),
)


class Efficiency(Fact):
    """A fact of Law 4's table: for an η, with which bandwidth it multiplies and on which bytes."""

    # Which bandwidth of its tier it multiplies — the spec-sheet figure or a measured one. The
    # register reads both ways (L-01's table vs L-11), so it is never implied.
    basis: Optional[Literal["spec", "measured"]] = None
    # Which bytes per token it was fitted on — the weights a token reads ("active") or the whole
    # file, embedding and header included ("file": L-15's per-format η reproduce the seed's
    # 26.87 / 22.72 tok/s only that way). None: the law's default for its kind (tiers.py).
    bytes: Optional[Literal["active", "file"]] = None


class Law4Profile(Strict):
    """``[laws.law4]`` of a hardware profile."""

    # η per tier name, and per tier name per weight format (L-15: η depends on unpack cost).
    eta: dict[str, Efficiency] = Field(default_factory=dict)
    eta_format: dict[str, dict[str, Efficiency]] = Field(default_factory=dict)
    constants: dict[str, Efficiency] = Field(default_factory=dict)  # e.g. cpu_attention_k_us, eta_kv

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> "Law4Profile":
        # "<field>: <message>": core names the field from this prefix, after laws.law4. The rules
        # that need the tiers run where core hands the profile in (validation context "profile");
        # the table alone (`lawbench schema`, a test) is checked for its own ranges only.
        profile = (info.context or {}).get("profile")
        names = [t.name for t in profile.tiers] if profile is not None else None
        for table, keys in (("eta", self.eta), ("eta_format", self.eta_format)):
            for key in keys if names is not None else ():
                if key not in names:
                    known = ", ".join(sorted(names)) or "(no tiers)"
                    raise ValueError(f"{table}.{key}: refers to tier {key!r}, which this profile does not "
                                     f"define (tiers: {known})")
        for key, fact in self.constants.items():
            for named, in_range, rule in CONSTANT_RANGES:
                if named(key) and not in_range(fact.value):
                    raise ValueError(f"constants.{key}.value: {rule} (got {fact.value:g})")
        for where, tier, fact in self.efficiencies(names or ()):
            if not 0 < fact.value <= ETA_MAX:
                raise ValueError(f"{where}.value: an η is a fraction of its tier's bandwidth, above 0 and "
                                 f"at most {ETA_MAX:g} (got {fact.value:g})")
            if fact.basis is None:
                raise ValueError(f"{where}.basis: an η must say which bandwidth of its tier it "
                                 f'multiplies: basis = "spec" or "measured"')
            t = next((t for t in profile.tiers if t.name == tier), None) if profile is not None else None
            if t is not None and getattr(t, f"bandwidth_{fact.basis}_gbs") is None \
                    and not (fact.basis == "measured" and profile.fingerprint.generic):
                raise ValueError(f"{where}.basis: this η multiplies the {fact.basis} bandwidth, but "
                                 f"tier {tier!r} has no bandwidth_{fact.basis}_gbs")
        return self

    def efficiencies(self, tiers: "list[str] | tuple[str, ...]") -> list[tuple[str, Optional[str], Efficiency]]:
        """Every η with the tier it applies to (None where ``tiers`` has none of that name):
        eta.<tier>, eta_format.<tier>.<fmt>, and the constants named eta_<tier>_… (eta_kv applies to
        whichever tier holds the KV cache)."""
        out: list[tuple[str, Optional[str], Efficiency]] = [(f"eta.{k}", k, f) for k, f in self.eta.items()]
        out += [(f"eta_format.{k}.{fmt}", k, f) for k, table in self.eta_format.items()
                for fmt, f in table.items()]
        for key, f in self.constants.items():
            if key.startswith("eta_"):
                tier = key.split("_")[1]
                out.append((f"constants.{key}", tier if tier in tiers else None, f))
        return out

    def constant(self, key: str) -> Optional[float]:
        """A constant's value, None where the profile states none."""
        fact = self.constants.get(key)
        return None if fact is None else fact.value

    def eta_for(self, tier: str, fmt: Optional[str] = None) -> float:
        """η for a tier, per format where the profile publishes one (L-15), else the tier average.

        :raises KeyError: the profile states no η for that tier.
        """
        if fmt is not None and fmt in self.eta_format.get(tier, {}):
            return self.eta_format[tier][fmt].value
        if tier not in self.eta:
            raise KeyError(f"no eta for tier {tier!r}")
        return self.eta[tier].value


def law4_profile(profile: HardwareProfile) -> Law4Profile:
    """The profile's ``[laws.law4]`` table, validated: the one way Law 4 reads its constants.

    :raises DataError: naming the profile and the field, for a profile built in code with a bad
        table (a profile file was checked when it loaded).
    """
    try:
        return profile.law_table("law4", Law4Profile)
    except ValidationError as exc:
        raise validation_error(f"hardware profile {profile.id!r}", exc, prefix="laws.law4") from None

