"""The `case` (and `arms`) tables a minfer anchor may carry, checked before anything runs."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lawbench import ANCHOR_FILE, Anchor, DataError, FiniteFloat, validation_error
from lawbench.plugins.minfer.engine import CMD_ENV, LLAMA_CMD_ENV, MODEL_ENV
from lawbench.plugins.minfer.revisions import Revisions

# What a case measures. The first three run an engine; the last two read no engine at all:
# plane_bytes is arithmetic over `shapes`, q6k_tensors reads the model file's GGUF header.
# kernel_time_ms: the mean GPU time per launch of one kernel at one launch grid, from lawbench's
# CUPTI kernel tracer loaded into the engine (docs/minfer-contract.md §9).
# long_scoreboard_pct: Nsight Compute's Warp State long_scoreboard share of one kernel's launches at one
# grid (stalled-on-L1TEX cycles over cycles per issued instruction, %), ncu run around the engine
# (lawbench.engines.read_counters; docs/minfer-contract.md §11).
# test_suite (census): the engine's own test suite, run by the command in case.command_env, counted
# from libtest's "test result:" lines (passed / failed / ignored; docs/minfer-contract.md §10).
# gate_switch (census): one gate's switch semantics, from three traced passes (the gate unset, set to
# its on value, set to "0"): how many kernels' executed counts differ between them (plugins/minfer/gates.py).
# greedy_parity (census): the greedy token streams of `passes` passes per mode (the anchor's arms), and how
# many distinct streams they make (plugins/minfer/parity.py).
Measure = Literal["per_pid_memory_mib", "prefill_tok_s", "kernel_time_ms", "long_scoreboard_pct", "test_suite",
                  "gate_switch", "greedy_parity", "plane_bytes", "q6k_tensors"]
# one reading per engine pass
SAMPLED_MEASURES = ("per_pid_memory_mib", "prefill_tok_s", "kernel_time_ms", "long_scoreboard_pct")
KERNEL_MEASURES = ("kernel_time_ms", "long_scoreboard_pct")  # the ones that name case.kernel
ENGINE_MEASURES = (*SAMPLED_MEASURES, "test_suite", "gate_switch", "greedy_parity")
Engine = Literal["minfer", "llama.cpp"]
# The units a plane_bytes prediction may be stated in (the seed writes B, MiB, MB, GB and % of a
# card; its GB and MB are decimal: "1,521,237,632 B ≈ 1.52 GB").
PLANE_UNITS = {"B": 1.0, "MiB": 2.0 ** 20, "MB": 1e6, "GB": 1e9}
PERCENT = "%"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Run(_Strict):
    """How to start one engine pass: which engine, which command, with which environment."""

    engine: Engine = "minfer"
    env: dict[str, str] = Field(default_factory=dict)
    # Variables removed from the runner's environment first, so "default" really is the default
    # even on a box with a stray export (seed 002: unset MINFER_MMQ_Q6K_EXP means "1").
    unset_env: list[str] = Field(default_factory=list)
    # The env var holding the command line; by default LAWBENCH_MINFER_CMD for minfer and
    # LAWBENCH_MINFER_LLAMA_CMD for llama.cpp.
    command_env: Optional[str] = None
    # The minfer revisions this run's number was published for (lawbench.plugins.minfer.revisions).
    revisions: Optional[Revisions] = None
    # The engine build's code commit the number was published on (r41's 'b891e1b'), for a figure of a
    # revision other than the engine of record: the probe must report a commit that matches it
    # (docs/minfer-contract.md §4, minfer_commit), else the runner lacks that build.
    commit: Optional[str] = Field(default=None, pattern=r"^[0-9a-f]{7,40}$")
    label: Optional[str] = None  # how reports name this configuration, e.g. "EXP=0"

    @property
    def command(self) -> str:
        return self.command_env or (LLAMA_CMD_ENV if self.engine == "llama.cpp" else CMD_ENV)


class Shape(_Strict):
    """`count` tensors of od × id elements, e.g. 14 attn_v of 512 × 3584."""

    name: str
    count: int = Field(ge=1)
    od: int = Field(ge=1)  # output rows
    id: int = Field(ge=1)  # input columns (the row length the plane gate checks: id % 256 == 0)


class Kernel(_Strict):
    """Which launches a kernel time sums: a kernel by its base name, at a launch grid (None: any).

    One kernel often serves several tensors (minfer's q6_K GEMM runs attn_v, ffn_down and
    output.weight); its grid tells them apart (grid.y = ceil(od / 128) there)."""

    name: str = Field(min_length=1)
    grid_x: Optional[int] = Field(default=None, ge=1)
    grid_y: Optional[int] = Field(default=None, ge=1)
    grid_z: Optional[int] = Field(default=None, ge=1)

    @property
    def grid(self) -> tuple[Optional[int], Optional[int], Optional[int]]:
        return (self.grid_x, self.grid_y, self.grid_z)


class Gate(_Strict):
    """An engine switch and the value that turns it on explicitly (r60: "unset or any non-\"0\"
    value = ON", except MINFER_MMQ_A_FUSE, whose unset is mode 2 and whose "1" is mode 1)."""

    name: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$")
    on: str = Field(default="1", min_length=1)


class Case(Run):
    model: Optional[str] = None  # the seed's own words for the model, e.g. "7B q4_k_m"
    architecture: Optional[str] = None  # the architecture the shape table was taken from
    measure: Optional[Measure] = None
    statistic: Literal["value", "difference"] = "value"  # difference: arm a − arm b, per pair
    timeout_s: FiniteFloat = Field(default=600.0, gt=0)
    shapes: list[Shape] = Field(default_factory=list)
    # The card a plane is weighed against when the anchor's unit is "%" (seed: "19% of an 8 GB card").
    card_gb: Optional[FiniteFloat] = Field(default=None, gt=0)
    model_env: str = MODEL_ENV  # q6k_tensors: the env var naming the GGUF file the engine loads
    kernel: Optional[Kernel] = None  # kernel_time_ms, long_scoreboard_pct: which kernel, at which grid
    gate: Optional[Gate] = None  # gate_switch: which switch
    passes: int = Field(default=1, ge=1, le=10)  # greedy_parity: engine passes per mode


def parse_case(anchor: Anchor) -> Case:
    return _validate(Case, anchor.case, anchor, "case")


def parse_arm(anchor: Anchor, name: str) -> Run:
    return _validate(Run, anchor.arms[name], anchor, f"arms.{name}")


def runs(anchor: Anchor, case: Case) -> dict[str, tuple[str, Run]]:
    """Each engine run of the anchor: {arm: (its field path, the run)}; "main" when it has no arms.

    An arm without a range of its own takes the case's, if it runs minfer (a llama.cpp arm has none).
    """
    if not anchor.arms:
        return {"main": ("case", case)}
    out = {}
    for name in anchor.arms:
        arm = parse_arm(anchor, name)
        if arm.revisions is None and arm.engine == "minfer" and case.revisions is not None:
            arm = arm.model_copy(update={"revisions": case.revisions})
        out[name] = (f"arms.{name}", arm)
    return out


def check_case(anchor: Anchor) -> Case:
    """Everything the law reads, checked without running: a DataError names the field."""
    case = parse_case(anchor)
    runs_engine = case.measure in ENGINE_MEASURES or anchor.kind == "census" and case.measure is None
    for where, run in runs(anchor, case).values():
        if run.engine == "llama.cpp" and run.revisions is not None:
            _fail(anchor, f"{where}.revisions", "a llama.cpp run has no minfer revision; "
                                                "give the range on the minfer run(s) only")
        # Seed 002's numbers belong to one engine record: an engine anchor says which (issue 9, §5).
        if runs_engine and run.engine == "minfer" and run.revisions is None:
            _fail(anchor, f"{where}.revisions", "a minfer engine run needs the engine revisions its published "
                                                "number holds for, e.g. revisions = { min = \"r54\", before = \"r56\" }")
    if anchor.kind == "agreement" and not (case.measure == "per_pid_memory_mib" and case.shapes):
        _fail(anchor, "case.shapes", "an agreement anchor weighs measured per-PID memory against the plane the "
                                     "law prices: it needs measure = \"per_pid_memory_mib\" and the shapes")
    if (case.measure in KERNEL_MEASURES) != (case.kernel is not None):
        _fail(anchor, "case.kernel", "a kernel time or counter names its kernel and nothing else does: measure = "
                                     "\"kernel_time_ms\" or \"long_scoreboard_pct\" needs case.kernel = "
                                     "{ name = \"…\", grid_y = … }, and case.kernel needs one of them")
    if case.measure == "long_scoreboard_pct" and anchor.unit != PERCENT:
        _fail(anchor, "unit", f"a long_scoreboard share is read in %, not {anchor.unit!r}")
    if case.measure == "test_suite" and (anchor.kind != "census" or case.command_env is None):
        _fail(anchor, "case.command_env", "a test suite is counted by a census anchor that names the variable "
                                          "holding the suite's command, e.g. command_env = \"LAWBENCH_MINFER_SUITE_CMD\"")
    if (case.measure == "gate_switch") != (case.gate is not None) or (case.gate and anchor.kind != "census"):
        _fail(anchor, "case.gate", "a gate's switch semantics is a census with measure = \"gate_switch\" and "
                                   "case.gate = { name = \"MINFER_…\", on = \"1\" }, all three or none")
    if case.gate is not None and (case.gate.name in case.env or case.gate.name in case.unset_env or case.gate.on == "0"):
        _fail(anchor, "case.gate", f"the census sets {case.gate.name} itself (unset, {case.gate.on!r}, \"0\"): leave it out "
                                   "of env and unset_env, and give an on value other than \"0\"")
    if case.measure == "greedy_parity" and (anchor.kind != "census" or len(anchor.arms) < 2):
        _fail(anchor, "arms", "greedy parity compares modes: a census anchor with one arm per mode (at least two, "
                              "e.g. arms.default = { unset_env = [\"MINFER_MMQ_Q6K_EXP\"] } and arms.exp0 = "
                              "{ env = { MINFER_MMQ_Q6K_EXP = \"0\" } })")
    if case.passes != 1 and case.measure != "greedy_parity":
        _fail(anchor, "case.passes", "case.passes (engine passes per mode) is read by measure = \"greedy_parity\" only")
    if case.measure == "kernel_time_ms" and anchor.kind == "measurement" and anchor.unit != "ms":
        _fail(anchor, "unit", f"a kernel time is read in ms, not {anchor.unit!r}")
    if case.measure == "plane_bytes":
        if anchor.unit not in (*PLANE_UNITS, PERCENT):
            _fail(anchor, "unit", f"a plane_bytes anchor is stated in {', '.join([*PLANE_UNITS, PERCENT])}, "
                                  f"not {anchor.unit!r}")
        if (anchor.unit == PERCENT) != (case.card_gb is not None):
            _fail(anchor, "case.card_gb", "a plane weighed as a share of a card needs unit = \"%\" and case.card_gb "
                                          "(the card's size in GB), both or neither")
    return case


def _fail(anchor: Anchor, field: str, message: str) -> None:
    raise DataError(ANCHOR_FILE, message, anchor=anchor.id, field=field)


def _validate(model: type, data: Any, anchor: Anchor, where: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:  # core names the anchor's file (DataError.located)
        raise validation_error(ANCHOR_FILE, exc, anchor=anchor.id, prefix=where) from None
