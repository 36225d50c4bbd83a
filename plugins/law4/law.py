"""Law 4, the placement identity: decode tok/s priced from bytes per token and tier bandwidths.

predict() turns an anchor's case into one number in the anchor's unit. The arithmetic lives in
`pricing` (pure functions); this module resolves the model (manifest, GGUF header), the tiers
(profile constants, overridden by the case where the published figure used other ones), and the
quantity. Measurement through llama-bench (`sampler`, `census`) lives in `measure`.

A measured anchor prices exactly what it runs: a case with a `bench` table is priced at the mean
KV length of its decode visit (bench.depth + (n_gen + 1) / 2), and an anchor with arms a, b is
priced as the ratio of the two arms' decode speeds. Its model file is fetched (real) or built
(synthetic) through the run's model store, since the measurement needs the file anyway;
prediction anchors read headers only and never download.
"""
from __future__ import annotations

from typing import Any, Optional

from lawbench import Anchor, DataError, HardwareProfile, Law, NotApplicable, Prediction
from lawbench.plugins.law4 import compute_ceiling, measured_kinds, misses, population
from lawbench.plugins.law4 import pricing as P
from lawbench.plugins.law4.blocks import block_densities
from lawbench.plugins.law4.case import (
    CASE_FILE,
    Law4Case,
    calibrated,
    parse_case,
    priced_case,
    reference_arm,
    unit_scale,
)
from lawbench.plugins.law4.models import Models, check_model_ref, load_model
from lawbench.plugins.law4.profile import Law4Profile, law4_profile
from lawbench.plugins.law4.quantmix import apply_mix, weight_format
from lawbench.plugins.law4.shape import ModelShape
from lawbench.plugins.law4.shape_checks import ShapeError

# Tier resolution lives in tiers.py.
from lawbench.plugins.law4.tiers import k_seconds, resolve_placement, resolve_tiers
from lawbench.plugins.law4.versions import CPU_ATTENTION, CURRENT, LawVersion, check_quantity, resolve


class TierUnknown(NotApplicable):
    """The profile has no bandwidth or η for a tier the case needs: a SKIP until measured there."""


# --------------------------------------------------------------------------- the law


class Law4(Law):
    name = "law4"
    title = "Decode speed is a placement identity: bytes per token over η·bandwidth per tier"
    anchors_package = "lawbench.anchors.law4"

    case_model = Law4Case
    profile_model = Law4Profile  # [laws.law4] of a hardware profile: η per tier and format, constants

    def check_anchor(self, anchor: Anchor) -> None:
        """Every case (each arm laid over it), its quantity against the anchor's, the unit, the
        bench table of a measured anchor and the models it names — before anything runs."""
        from lawbench.plugins.law4.measure import arm_cases

        version = resolve(getattr(anchor, "law_version", None), anchor.id)
        if measured_kinds.check(anchor):  # spreads, KV-type perplexity: checked whole there
            return
        cases = arm_cases(anchor)
        for arm, case in cases.items():
            check_quantity(version, case.quantity, anchor.id)
        if anchor.arms:
            for arm, case in cases.items():
                if case.quantity != "decode_tok_s":
                    raise DataError(CASE_FILE, f"a two-arm anchor prices decode_tok_s per arm, not "
                                               f"{case.quantity!r}", anchor=anchor.id, field=f"arms.{arm}.quantity")
            if anchor.kind != "census" and anchor.quantity != "decode_ratio":
                raise DataError(CASE_FILE, f"a two-arm anchor measures decode_ratio (arm a over arm b), "
                                           f"not {anchor.quantity!r}", anchor=anchor.id, field="quantity")
        else:
            case = cases["main"]
            if case.calibrate:
                raise DataError(CASE_FILE, "calibrate = true needs two arms: arms.a (held out) and "
                                "arms.b (the calibration reference)", anchor=anchor.id, field="case.calibrate")
            if anchor.kind != "census" and anchor.quantity != case.quantity:
                # The verdict is about case.quantity; a different anchor.quantity would label it falsely.
                raise DataError(CASE_FILE, f"quantity {anchor.quantity!r} differs from case.quantity "
                                           f"{case.quantity!r}; name the same quantity in both",
                                anchor=anchor.id, field="quantity")
            if case.quantity == "scale_density_ratio":
                block_densities(case, anchor.id)  # a format without a listed layout, found at check
            elif case.vs is not None:
                reference_arm(case, anchor.case, anchor.id)
        if anchor.kind != "census":
            unit_scale(anchor.quantity, anchor.unit, anchor.id)
        for arm, case in cases.items():
            where = "case" if arm == "main" else f"arms.{arm}"
            if anchor.kind != "prediction" and case.bench is None:
                raise DataError(CASE_FILE, "a measured anchor needs a bench table: nothing says how to "
                                           "run it", anchor=anchor.id, field=f"{where}.bench")
            if case.model is not None:
                check_model_ref(case.model, anchor.id, f"{where}.model")

    def predict(self, anchor: Anchor, profile: HardwareProfile, resources: Any = None) -> Prediction:
        """A measured anchor's model file is fetched or built through ``resources`` (the
        measurement needs it anyway); a prediction anchor reads headers only and never downloads."""
        models = Models(resources, fetch=anchor.kind != "prediction")
        version = resolve(getattr(anchor, "law_version", None), anchor.id)
        if anchor.arms:
            return self._predict_arms(anchor, profile, models, version)
        case = parse_case(anchor.case, anchor.id)
        check_quantity(version, case.quantity, anchor.id)
        if case.calibrate:
            raise DataError(CASE_FILE, "calibrate = true needs two arms: arms.a (held out) and "
                            "arms.b (the calibration reference)", anchor=anchor.id, field="case.calibrate")
        scale = unit_scale(case.quantity, anchor.unit, anchor.id)
        try:
            value, detail = self.compute(priced_case(case), profile, anchor, models=models, version=version)
        except P.TierMissing as exc:
            raise TierUnknown(f"profile {profile.id!r}: {exc}") from None
        except ShapeError as exc:
            raise DataError(CASE_FILE, str(exc), anchor=anchor.id, field="case") from None
        detail.update(quantity=case.quantity, si_value=value, unit=anchor.unit, law_version=version.id)
        return Prediction(value=value / scale, detail=detail)

    def _predict_arms(self, anchor: Anchor, profile: HardwareProfile, models: Models,
                      version: LawVersion = CURRENT) -> Prediction:
        """Two-arm anchors: decode tok/s of arm a over arm b, each arm = case ⊕ arms.<name>."""
        from lawbench.plugins.law4.measure import arm_cases

        scale = unit_scale("decode_ratio", anchor.unit, anchor.id)
        detail: dict[str, Any] = {"quantity": "decode_ratio", "unit": anchor.unit, "law_version": version.id}
        speeds = {}
        for arm, case in arm_cases(anchor).items():
            if case.quantity != "decode_tok_s":
                raise DataError(CASE_FILE, f"a two-arm anchor prices decode_tok_s per arm, not "
                                           f"{case.quantity!r}", anchor=anchor.id, field="case.quantity")
            case = priced_case(case)
            if case.calibrate:
                detail["calibrated_on"] = "arm b"
                case = calibrated(case, [(t.name, t.kind) for t in profile.tiers])
            try:
                speeds[arm], detail[f"arm_{arm}"] = self.tok_s(case, self._shape(case, anchor.id, models),
                                                               profile, version)
            except P.TierMissing as exc:
                raise TierUnknown(f"profile {profile.id!r}: {exc}") from None
            except ShapeError as exc:
                raise DataError(CASE_FILE, str(exc), anchor=anchor.id, field=f"arms.{arm}") from None
        ratio = speeds["a"] / speeds["b"]
        detail.update(si_value=ratio, tok_s_a=speeds["a"], tok_s_b=speeds["b"])
        if "calibrated_on" not in detail:
            return Prediction(value=ratio / scale, detail=detail)
        return self._calibrated(detail, scale)

    @staticmethod
    def _calibrated(detail: dict[str, Any], scale: float) -> Prediction:
        """Arm a's speed given arm b's, with the tier's η·BW (c) calibrated on arm b.

        Each arm's price at c = 1 GB/s splits into byte seconds S (weights and KV: scale as 1/c)
        and fixed seconds F (CPU attention: compute, not bytes). Arm b measured at t_b gives
        c = S_b / (t_b − F_b); the law then says t_a = S_a / c + F_a.
        """
        def split(arm: str) -> tuple[float, float]:
            seconds = detail[f"arm_{arm}"]["pricing"]["seconds"]
            fixed = seconds.get("cpu_attention", 0.0)
            return sum(seconds.values()) - fixed, fixed

        (s_a, f_a), (s_b, f_b) = split("a"), split("b")

        def from_reference(tok_s_b: float) -> float:
            t_b = 1.0 / tok_s_b
            if t_b <= f_b:  # the fixed term alone outlasts arm b's token: no rate explains it
                return float("nan")
            c = s_b / (t_b - f_b)
            return 1.0 / (s_a / c + f_a) / scale

        detail.update(bytes_per_token_a=s_a * 1e9, bytes_per_token_b=s_b * 1e9,
                      fixed_seconds_a=f_a, fixed_seconds_b=f_b,
                      note="value = bytes ratio b/a; the verdict uses per-round predictions from arm b")
        return Prediction(value=s_b / s_a / scale, detail=detail, from_reference=from_reference)

    def sampler(self, anchor: Anchor, profile: HardwareProfile, resources: Any) -> Any:
        from lawbench.plugins.law4 import measure, speculative

        own = measured_kinds.sampler(self, anchor, profile, resources)  # the measured-only quantities
        if own is not None:
            return own
        cases = measure.arm_cases(anchor)
        if any(c.bench is not None and c.bench.tool == "server" for c in cases.values()):
            return speculative.sampler(anchor, profile, resources, cases)  # llama-server, not llama-bench
        return measure.sampler(anchor, profile, resources)

    def census(self, anchor: Anchor, profile: HardwareProfile, resources: Any) -> Any:
        from lawbench.plugins.law4 import census

        return census.census(anchor, profile, resources)

    def parity(self, anchor: Anchor, profile: HardwareProfile, resources: Any) -> dict[str, Any]:
        from lawbench.plugins.law4 import census

        return census.parity(anchor, profile, resources)

    def measures_engine_speed(self, anchor: Anchor) -> bool:
        """A decode or prefill speed, as the anchor's quantity or as the case each arm runs
        (a decode_ratio anchor times decode_tok_s in both arms)."""
        quantity = anchor.case.get("quantity") if isinstance(anchor.case, dict) else None
        return super().measures_engine_speed(anchor) or str(quantity or "").endswith("tok_s")

    def machine_terms(self, result: Any) -> list[Any]:
        """The effective η·BW a calibrated agreement anchor measured on its reference arm."""
        from lawbench.plugins.law4.machine_terms import eta_bw

        term = eta_bw(result)
        return [term] if term is not None else []

    # One method per family of quantities keeps each path short enough to check by eye.
    def compute(self, case: Law4Case, profile: HardwareProfile, anchor: Anchor,
                models: Optional[Models] = None, version: LawVersion = CURRENT) -> tuple[float, dict[str, Any]]:
        q = case.quantity
        if q in ("draft_acceptance", "prefix_cache_speedup"):  # check_anchor refuses them on a prediction
            raise DataError(CASE_FILE, f"{q} is measured in llama-server, never priced",
                            anchor=anchor.id, field="case.quantity")
        if q in population.QUANTITIES:  # arithmetic on published figures: no model, no tiers
            return population.compute(case, anchor.id)
        if q in misses.QUANTITIES:  # a published prediction against its measurement: no tiers
            return misses.compute(case, anchor.id)
        if q in measured_kinds.MEASURED_ONLY:  # their checks refuse them on a prediction
            raise DataError(CASE_FILE, f"{q} is measured (a spread of readings, or a perplexity), never priced",
                            anchor=anchor.id, field="case.quantity")
        shape = self._shape(case, anchor.id, models)
        if q in compute_ceiling.QUANTITIES:  # FLOPs, not bytes: the prefill wall (L-12)
            return compute_ceiling.compute(case, shape, profile, anchor.id)
        if q in ("kv_bytes_per_pos", "kv_bytes_ratio", "kv_reference_ratio", "kv_compression_needed"):
            return self._kv(case, shape, anchor, models)
        if q in ("active_bytes_per_token", "active_params", "total_params", "routed_share",
                 "always_active_share", "expert_ceiling"):
            return self._bytes(case, shape, anchor)
        if q in ("fits", "fit_margin_gb"):
            return self._fit(case, shape, profile, version)
        if q == "scale_density_ratio":
            mine, ref = block_densities(case, anchor.id)
            return mine / ref, {"chains_per_quant_byte": mine, "reference_chains_per_quant_byte": ref,
                                "source": "ggml/src/ggml-common.h (block_q*_K), plugins/law4/blocks.py"}
        if q == "cpu_attention_k_from_layer_cost":
            # L-19's k is seconds per position per CPU layer per token; a per-layer cost measured
            # at depth ctx is ctx positions' worth of it (register U-25: 'd16k 23.5 ms/layer').
            k = case.layer_cost_ms * 1e-3 / case.ctx  # type: ignore[operator]
            return k, {"layer_cost_s": case.layer_cost_ms * 1e-3, "ctx": case.ctx}  # type: ignore[operator]
        if q.startswith("decode"):
            tok_s, detail = self.tok_s(case, shape, profile, version)
            if q == "decode_tok_s":
                return tok_s, detail
            ref = reference_arm(case, anchor.case, anchor.id)
            ref_tok_s, ref_detail = self.tok_s(ref, self._shape(ref, anchor.id, models), profile, version)
            ratio = tok_s / ref_tok_s
            out = {"arm": detail, "reference_arm": ref_detail, "ratio": ratio}
            return (ratio - 1.0 if q == "decode_change" else ratio), out
        return self._slope(case, shape, profile, version)

    def _shape(self, case: Law4Case, anchor_id: str,
               models: Optional[Models] = None) -> Optional[ModelShape]:
        if case.model is None:
            return None
        models = models or Models()
        shape = load_model(case.model, anchor_id, models.resources, fetch=models.fetch)
        for field in ("weight_type", "weight_mix"):
            value = getattr(case, field)
            if not value:
                continue
            try:
                shape = shape.with_weight_type(value) if field == "weight_type" else apply_mix(shape, value)
            except ShapeError as exc:
                raise DataError(CASE_FILE, str(exc), anchor=anchor_id, field=f"case.{field}") from None
        return shape

    def _kv(self, case: Law4Case, shape: Any, anchor: Anchor,
            models: Optional[Models]) -> tuple[float, dict[str, Any]]:
        kv = P.kv_bytes_per_pos(shape, case.kv_type, case.kv_layout)
        detail: dict[str, Any] = {"kv_bytes_per_pos": kv, "model": shape.source}
        if case.quantity == "kv_bytes_per_pos":
            return kv, detail
        if case.quantity == "kv_bytes_ratio":
            ref = reference_arm(case, anchor.case, anchor.id)
            ref_kv = P.kv_bytes_per_pos(self._shape(ref, anchor.id, models), ref.kv_type, ref.kv_layout)
            detail["reference_kv_bytes_per_pos"] = ref_kv
            return kv / ref_kv, detail
        if case.quantity == "kv_reference_ratio":
            return case.reference_kv_bytes / kv, detail  # type: ignore[operator]
        budget = case.state_budget_gb * 1e9 / case.ctx  # type: ignore[operator]
        detail["budget_bytes_per_pos"] = budget
        return kv / budget, detail

    def _bytes(self, case: Law4Case, shape: Any, anchor: Anchor) -> tuple[float, dict[str, Any]]:
        q, k = case.quantity, case.experts_used
        detail: dict[str, Any] = {"model": shape.source}
        if q == "total_params":
            return P.total_params(shape), detail
        if q == "active_params":
            return P.active_params(shape, k), detail
        roles = P.bytes_by_role(shape, k)
        detail["bytes_by_role"] = roles
        if q == "active_bytes_per_token":
            return sum(roles.values()), detail
        if q == "routed_share":
            return P.routed_share(shape, k), detail
        if q == "always_active_share":
            return 1.0 - P.routed_share(shape, k), detail
        k_used = (case.vs or {}).get("experts_used") or shape.expert_used_count
        if not k_used:
            raise DataError(CASE_FILE, f"{shape.source} states no expert_used_count; give case.vs.experts_used",
                            anchor=anchor.id, field="case.vs.experts_used")
        share = P.routed_share(shape, k_used)
        detail.update(routed_share=share, k=k, k_used=k_used)
        return P.expert_ceiling(share, int(k or 0), int(k_used)), detail

    def tok_s(self, case: Law4Case, shape: Optional[ModelShape], profile: HardwareProfile,
              version: LawVersion = CURRENT) -> tuple[float, dict[str, Any]]:
        """Decode tok/s of a case: the full general form, or a published ctx-0 speed plus the
        context terms (the form the seed's v1.1 and L-19 predictions were made in)."""
        ctx_s, detail = self.context_seconds(case, shape, profile, version)
        if case.baseline_tok_s is not None:
            t = 1.0 / case.baseline_tok_s + ctx_s
            detail.update(form="baseline + context terms", baseline_tok_s=case.baseline_tok_s)
            return 1.0 / t, detail
        if shape is None or not shape.has_tensors:
            raise DataError(CASE_FILE, "decode_tok_s without baseline_tok_s needs a model with tensors",
                            field="case.model")
        pricing = self.price(case, shape, profile, version)
        if pricing.does_not_fit:
            raise DataError(CASE_FILE, f"the placement does not fit on profile {profile.id!r}: "
                                       f"{'; '.join(pricing.does_not_fit)} (ask quantity 'fits', or "
                                       f"price a placement that holds the model)", field="case.placement")
        detail.update(form="general", pricing=pricing.as_dict())
        return pricing.tok_s, detail

    def price(self, case: Law4Case, shape: ModelShape, profile: HardwareProfile,
              version: LawVersion = CURRENT) -> P.Pricing:
        """One placement priced with exactly the version's terms (versions.py)."""
        tiers = resolve_tiers(case, profile, shape.is_moe, weight_format(shape), version)
        placement = resolve_placement(case, tiers, shape.n_layer)
        return P.price_decode(shape, tiers, placement, ctx=case.ctx, kv_type=case.kv_type,
                              kv_layout=case.kv_layout, experts_used=case.experts_used,
                              eta_kv=case.eta_kv or law4_profile(profile).constant("eta_kv"),
                              cpu_attention_k_s=k_seconds(case, profile), terms=version.terms)

    def _fit(self, case: Law4Case, shape: Optional[ModelShape], profile: HardwareProfile,
             version: LawVersion) -> tuple[float, dict[str, Any]]:
        """The capacity question: does the placement hold the model (1/0), or by how much."""
        if shape is None or not shape.has_tensors:
            raise DataError(CASE_FILE, f"{case.quantity} needs a model with tensors", field="case.model")
        pr = self.price(case, shape, profile, version)
        margin = pr.fit_margin()
        if margin is None:
            raise TierUnknown(f"profile {profile.id!r} states no capacity for the tiers this "
                              f"placement uses")
        detail = {"pricing": pr.as_dict(), "fit_margin_bytes": margin}
        return (1.0 if pr.fits_all else 0.0) if case.quantity == "fits" else margin, detail

    def context_seconds(self, case: Law4Case, shape: Optional[ModelShape], profile: HardwareProfile,
                        version: LawVersion = CURRENT) -> tuple[float, dict[str, Any]]:
        """Seconds per token the context adds: the KV read on its tier, plus CPU attention."""
        if case.ctx == 0:
            return 0.0, {"kv_seconds": 0.0, "cpu_attention_seconds": 0.0}
        if shape is None:
            n = case.n_cpu_layers or 0
            k = (k_seconds(case, profile) or 0.0) if version.has(CPU_ATTENTION) else 0.0
            return n * case.ctx * k, {"kv_seconds": 0.0, "cpu_attention_seconds": n * case.ctx * k,
                                      "cpu_attention_layers": n}
        kv_only = ModelShape(shape.id, shape.architecture, shape.source, shape.metadata, (), shape.notes)
        # Context terms only: without weights nothing competes for capacity, so no fit-check.
        pr = self.price(case, kv_only, profile, version)
        kv_s = sum(v for t, v in pr.seconds.items() if t.startswith("kv@"))
        cpu_s = pr.seconds.get("cpu_attention", 0.0)
        return kv_s + cpu_s, {"kv_seconds": kv_s, "cpu_attention_seconds": cpu_s,
                              "cpu_attention_layers": pr.cpu_attention_layers, "kv_bytes": pr.kv_bytes}

    def _slope(self, case: Law4Case, shape: Optional[ModelShape], profile: HardwareProfile,
               version: LawVersion = CURRENT) -> tuple[float, dict[str, Any]]:
        """Quantities read off a published pair (baseline at ctx 0, measured at ctx)."""
        dt = 1.0 / case.measured_tok_s - 1.0 / case.baseline_tok_s  # type: ignore[operator]
        q = case.quantity
        if q == "cpu_attention_k_implied":
            probe = case.model_copy(update={"cpu_attention_k_us": 0.0})
            kv_s, detail = self.context_seconds(probe, shape, profile, version)
            if shape is None:
                positions = (case.n_cpu_layers or 0) * case.ctx
            else:
                unit = case.model_copy(update={"cpu_attention_k_us": 1e6})  # k = 1 s: seconds = positions
                positions = self.context_seconds(unit, shape, profile, version)[1]["cpu_attention_seconds"]
            if not positions:
                raise DataError(CASE_FILE, "no attention runs on the CPU in this case (placement "
                                           "or n_cpu_layers)", field="case.placement")
            detail.update(slope_seconds=dt, cpu_positions=positions)
            return (dt - kv_s) / positions, detail
        if q == "eta_kv_implied":
            at_one = case.model_copy(update={"eta_kv": 1.0, "cpu_attention_k_us": 0.0})
            kv_s, detail = self.context_seconds(at_one, shape, profile, version)
            cpu = self.context_seconds(case.model_copy(update={"eta_kv": 1.0}), shape, profile, version)[1]
            detail.update(slope_seconds=dt)
            return kv_s / (dt - cpu["cpu_attention_seconds"]), detail
        ctx_s, detail = self.context_seconds(case, shape, profile, version)
        detail.update(slope_seconds=dt)
        return ctx_s / dt, detail
