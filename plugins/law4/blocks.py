"""ggml's k-quant block layouts: how many quant bytes share one scale+min pair (seed 000, L-16).

Every k-quant super-block holds QK_K = 256 weights (ggml/src/ggml-common.h: `#define QK_K 256`),
cut into sub-blocks that each carry one scale and one min. Dequantizing a weight means applying
its sub-block's scale and min, so the number of scale+min chains per quant byte is a property of
the format's definition, not of a machine. The figures below are read off the structs of the
pinned llama.cpp source (b11434, ggml/src/ggml-common.h); only formats with a scale AND a min
are listed (Q3_K and Q6_K carry a scale alone).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lawbench import DataError
from lawbench.plugins.law4.case import CASE_FILE

if TYPE_CHECKING:
    from lawbench.plugins.law4.case import Law4Case

QK_K = 256  # weights per super-block (ggml-common.h: #define QK_K 256)


@dataclass(frozen=True)
class KQuantBlock:
    sub_blocks: int  # scale+min pairs per super-block
    quant_bytes: int  # bytes of packed quants per super-block (scales and d/dmin not counted)

    @property
    def bytes_per_chain(self) -> float:
        return self.quant_bytes / self.sub_blocks

    @property
    def chains_per_quant_byte(self) -> float:
        return self.sub_blocks / self.quant_bytes


BLOCKS: dict[str, KQuantBlock] = {
    # block_q2_K: uint8_t scales[QK_K/16] ("scales and mins, quantized with 4 bits": one byte per
    # sub-block of 16), uint8_t qs[QK_K/4] (2-bit quants) -> 16 pairs over 64 quant bytes.
    "Q2_K": KQuantBlock(sub_blocks=QK_K // 16, quant_bytes=QK_K // 4),
    # block_q4_K: uint8_t scales[K_SCALE_SIZE] (8 scales and 8 mins at 6 bits, "8 blocks of 32
    # elements each"), uint8_t qs[QK_K/2] (4-bit quants) -> 8 pairs over 128 quant bytes.
    "Q4_K": KQuantBlock(sub_blocks=QK_K // 32, quant_bytes=QK_K // 2),
    # block_q5_K: the same 8 pairs at 6 bits, uint8_t qh[QK_K/8] (high bits) + qs[QK_K/2]
    # (low 4 bits) -> 8 pairs over 160 quant bytes.
    "Q5_K": KQuantBlock(sub_blocks=QK_K // 32, quant_bytes=QK_K // 8 + QK_K // 2),
}


def scale_density(weight_type: str) -> float:
    """Scale+min chains per quant byte of a k-quant format; KeyError names an unlisted one."""
    key = weight_type.upper()
    if key not in BLOCKS:
        raise KeyError(f"no k-quant block layout with scale+min for {weight_type!r}; "
                       f"known: {', '.join(BLOCKS)}")
    return BLOCKS[key].chains_per_quant_byte


def block_densities(case: "Law4Case", anchor_id: str) -> tuple[float, float]:
    """Scale+min chains per quant byte of case.weight_type and of case.vs.weight_type."""
    ref = (case.vs or {}).get("weight_type")
    out = []
    for field, wtype in (("case.weight_type", case.weight_type), ("case.vs.weight_type", ref)):
        if not isinstance(wtype, str):
            raise DataError(CASE_FILE, "scale_density_ratio compares two k-quant formats: give "
                            "vs = { weight_type = \"...\" }", anchor=anchor_id, field=field)
        try:
            out.append(scale_density(wtype))
        except KeyError as exc:
            raise DataError(CASE_FILE, str(exc.args[0]), anchor=anchor_id, field=field) from None
    return out[0], out[1]
