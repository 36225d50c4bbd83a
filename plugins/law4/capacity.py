"""The general form's fit-check: what each tier holds after its reserves, and what streams.

"Fit is checked per tier with KV counted" (seed 000, Law 4 general form). A tier holds its capacity
less its reserves (TierRate.reserve_gb: the OS, the desktop, the compute buffer). VRAM (and a unified
pool) cannot stream, so more than fits there "does not fit". RAM keeps KV first, then as much of its
weights as the page cache can hold; that share of each token's RAM read is served from RAM and the
rest streams from the disk tier (L-29). Versions before the general form only warn (raw_fit).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:  # pricing imports this module; the types are for readers and checkers only
    from lawbench.plugins.law4.pricing import Pricing, TierRate


def raw_fit(pr: Pricing, tiers: Mapping[str, TierRate]) -> None:
    """Versions before the general form: a tier over its bare capacity is only a warning."""
    for tier, held in pr.resident_bytes.items():
        cap = tiers[tier].capacity_gb if tier in tiers else None
        pr.fits[tier] = None if cap is None else held <= cap * 1e9
        if cap is not None and held > cap * 1e9:
            pr.warnings.append(f"{tier}: {held / 1e9:.2f} GB placed (KV at ctx {pr.ctx} included) "
                               f"exceeds its {cap:g} GB — Law 4 is priced outside its regime")


def hold(pr: Pricing, tiers: Mapping[str, TierRate], weights_held: dict[str, float]) -> None:
    """What each tier holds after its reserves, and what streams from disk where RAM cannot.

    KV is held first (anonymous memory: the kernel cannot page it back to the file). The page
    cache then holds as much of the RAM tier's weights as fits, and that share of every token's
    read is served from RAM; the rest comes off the disk tier (seed 000, L-29: "part of every pass
    comes off disk instead").
    """
    for tier, held in list(pr.resident_bytes.items()):
        rate = tiers.get(tier)
        if rate is None or rate.capacity_gb is None:
            pr.fits[tier] = None
            continue
        reserve = rate.reserve_gb * 1e9
        usable = rate.capacity_gb * 1e9 - reserve
        pr.reserve_bytes[tier], pr.usable_bytes[tier] = reserve, usable
        pr.fits[tier] = held <= usable
        if pr.fits[tier]:
            continue
        over = (f"{tier}: {held / 1e9:.2f} GB placed (KV at ctx {pr.ctx} included) and "
                f"{reserve / 1e9:.2f} GB reserved exceed its {rate.capacity_gb:g} GB")
        if rate.kind != "ram":
            pr.does_not_fit.append(over + f" — {rate.kind} cannot stream the rest")
            continue
        cache = usable - pr.kv_bytes.get(tier, 0.0)
        if cache <= 0:
            pr.does_not_fit.append(over + " — the KV cache alone fills what is left, and KV "
                                          "cannot be paged to disk")
            continue
        disk = next((t for t in tiers.values() if t.kind == "disk" and t.eta is not None), None)
        if disk is None:
            pr.does_not_fit.append(over + " — and the profile has no disk tier (bandwidth and η) "
                                          "to stream the rest from")
            continue
        miss = 1.0 - cache / weights_held[tier]
        streamed = pr.weight_bytes.get(tier, 0.0) * miss
        pr.page_cache_bytes[tier] = cache
        pr.streamed_bytes[tier] = streamed
        pr.weight_bytes[tier] -= streamed
        pr.weight_bytes[disk.name] = pr.weight_bytes.get(disk.name, 0.0) + streamed
        pr.warnings.append(f"{over}: the page cache holds {cache / 1e9:.2f} GB of its "
                           f"{weights_held[tier] / 1e9:.2f} GB of weights, so {miss:.1%} of each "
                           f"token's read there streams from {disk.name} (L-29)")
