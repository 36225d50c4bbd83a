"""Shared resources of one run, prepared once and only when an anchor asks: the box lock, the
llama.cpp build, the model store. A prediction-only run touches none of them.

One type for every run: a run that compares engine builds (`lawbench ab`) hands each side
``resources.with_engine(build)`` — that engine, this run's lock and model store.

It sits beside the Law interface (core/laws/law.py) whose methods are handed it, above the engines
and the model store it hands out (tests/test_import_graph.py: CORE_LAYERS)."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from lawbench.core.engines import patches as source_patches
from lawbench.core.engines.bench import quantize
from lawbench.core.engines.record import llama_version, record_status
from lawbench.core.errors import EngineError, LawbenchError
from lawbench.core.models import HardwareProfile

if TYPE_CHECKING:
    from lawbench.core.engines.llamacpp import LlamaCpp
    from lawbench.core.store.real import ModelStore

LLAMA_DIR_ENV = "LAWBENCH_LLAMA_DIR"


class Resources:
    """What a law's methods are handed: ``llama()``, ``model(id)``, ``store()``, ``lock()``.

    :param engine: an engine build already chosen (a located or built llama.cpp): the run measures
        with it instead of choosing one (``--llama-dir``, the engine of record, the pinned build).
    """

    # True on a side of an engine comparison: the sampler measures an engine against another on
    # the anchor's case, not the law, so a probe deciding whether the law applies has nothing to do.
    comparing_engines = False

    def __init__(self, llama_dir: Optional[str] = None, profile: Optional[HardwareProfile] = None, *,
                 engine: Optional[LlamaCpp] = None):
        self.llama_dir = llama_dir or os.environ.get(LLAMA_DIR_ENV) or None
        self.profile = profile
        self._stack = contextlib.ExitStack()
        self._locked = False
        self._llama: Optional[LlamaCpp] = engine
        self._llama_error: Optional[LawbenchError] = None
        # patched builds of the same source (an arm's bench.patches), by their patches' names
        self._patched: dict[tuple[str, ...], LlamaCpp] = {}
        self._patched_errors: dict[tuple[str, ...], EngineError] = {}
        self._store: Optional[ModelStore] = None
        self._shared: Optional["Resources"] = None  # the run whose lock and store a side uses
        self.llama_chosen_by = "--llama-dir"  # else set when the build is chosen (engines.record)

    def with_engine(self, engine: LlamaCpp) -> "Resources":
        """This run's lock and model store, measuring with ``engine`` (one side of an A/B)."""
        side = Resources(profile=self.profile, engine=engine)
        side._shared, side.comparing_engines = self, True
        return side

    def lock(self) -> None:
        """One job per box: held from the first engine or model use to the end of the run."""
        if self._shared is not None:
            return self._shared.lock()
        if self._locked:
            return
        from lawbench.core.lock import box_lock  # filelock: loaded with the first lock, not by every command

        try:
            self._stack.enter_context(box_lock())
        except LawbenchError as exc:
            raise EngineError(str(exc)) from None
        self._locked = True

    def backend(self) -> str:
        fp = self.profile.fingerprint if self.profile else None
        return "cuda" if fp is not None and fp.requires_gpu else "cpu"

    def cuda_arch(self) -> str:
        """The profile's GPU architecture ("61" Pascal, "90" Hopper, "121" GB10): the build follows
        the hardware the anchors describe (core/engines/cuda.py says why)."""
        from lawbench.core.engines.cuda import arch_of

        cc = self.profile.fingerprint.compute_capability if self.profile else None
        return arch_of(cc) if cc else "90"

    def llama(self, patches: Sequence[str] = ()) -> LlamaCpp:
        """The llama.cpp to measure with: a runner's own build by path, else the profile's engine of
        record, else the pinned build (lawbench.core.engines.record).

        :param patches: source patches lawbench ships (lawbench.core.engines.patches), by name: the
            same source built with them, under a build key of its own. A build lawbench did not make
            (``--llama-dir``, one side of an A/B) cannot be patched, so such an arm is an error.
        """
        if patches:
            return self._patched_llama(tuple(patches))
        if self._llama is not None:
            self.lock()  # a chosen engine measures under the box lock like a built one
            return self._llama
        if self._llama_error is not None:  # do not rebuild for every anchor after a failure
            raise self._llama_error
        self.lock()
        from lawbench.core.engines.llamacpp import locate_llamacpp

        try:
            if self.llama_dir:
                self._llama = locate_llamacpp(self.llama_dir)
            else:
                version, self.llama_chosen_by = llama_version(self.profile)
                self._llama = self._build(version)
        except LawbenchError as exc:
            self._llama_error = exc if isinstance(exc, EngineError) else EngineError(str(exc))
            raise self._llama_error from None
        return self._llama

    def _build(self, version: str, patches: Sequence[source_patches.SourcePatch] = ()) -> LlamaCpp:
        """lawbench's own build of ``version`` for this profile's backend (and patches), cached."""
        from lawbench.core.engines.build import build_llamacpp
        from lawbench.core.progress import report

        backend = self.backend()
        return build_llamacpp(version, backend=backend, progress=report, **({"patches": patches} if patches else {}),
                              **({"cuda_arch": self.cuda_arch()} if backend == "cuda" else {}))

    def _patched_llama(self, names: tuple[str, ...]) -> LlamaCpp:
        if names in self._patched:
            self.lock()
            return self._patched[names]
        if names in self._patched_errors:  # do not rebuild for every anchor after a failure
            raise self._patched_errors[names]
        try:
            patches = source_patches.named(names, "bench.patches")
            if self._llama is not None or self.llama_dir:
                given = self.llama_dir or (str(self._llama.bin_dir) if self._llama else "")
                chosen = "--llama-dir / $" + LLAMA_DIR_ENV if self.llama_dir else "the engine this run compares"
                raise EngineError(f"source patch {', '.join(names)}: this run measures with a build lawbench did "
                                  f"not make ({chosen}: {given}), which it cannot patch; a patched arm runs on "
                                  "lawbench's own build of the source (unset the runner's build to run it)")
            self.lock()
            version, why = llama_version(self.profile)
            if self._llama is None:
                self.llama_chosen_by = why
            built = self._build(version, patches)
        except LawbenchError as exc:
            self._patched_errors[names] = exc if isinstance(exc, EngineError) else EngineError(str(exc))
            raise self._patched_errors[names] from None
        self._patched[names] = built
        return built

    def store(self) -> ModelStore:
        # Building, fetching or requantizing a model loads the box: another job's timings would
        # see it, so it happens under the lock like a measurement.
        if self._shared is not None:
            return self._shared.store()
        self.lock()
        if self._store is None:
            from lawbench.core.store.real import ModelStore

            # Synthetic models other than F16 are requantized with this run's llama-quantize.
            self._store = ModelStore(quantize=lambda src, dst, t: quantize(self.llama(), src, dst, t))
        return self._store

    def model(self, model_id: str) -> Path:
        return self.store().path(model_id)

    def engine_info(self) -> Optional[dict]:
        """The engine this run measured with, and the patched builds of its source that arms ran on
        (``patched_builds``); a run whose only engine was patched is named by that build, whose
        build_info carries its ``patches`` (core.record.run_keys.engine_key keys on them)."""
        if self._llama is None and not self._patched:
            return None

        ll = self._llama if self._llama is not None else next(iter(self._patched.values()))
        record = record_status(self.profile, ll.build_info.get("build_number"))
        patched = [{"patches": list(names), "bin_dir": str(b.bin_dir), "version": b.version,
                    "build_number": b.build_info.get("build_number"), "commit": b.build_info.get("commit"),
                    "sources": b.build_info.get("patches")} for names, b in self._patched.items()]
        return {"name": "llama.cpp", "version": ll.version, "backend": ll.backend,
                "bin_dir": str(ll.bin_dir), **{k: v for k, v in ll.build_info.items() if k != "bin_dir"},
                "chosen_by": self.llama_chosen_by, **({"engine_of_record": record} if record else {}),
                **({"patched_builds": patched} if patched else {})}

    def close(self) -> None:
        self._stack.close()
        self._locked = False
