#!/usr/bin/env bash
# What a GPU runner job must get right, checked on a real one (no engine build, a minute):
# GPU detection through NVML and through nvidia-smi alone, a --strict job refused on a machine
# that is not its profile's (GPU missing, GPU of another kind), and a CUDA toolkit refused for an
# architecture it cannot target. Expects lawbench on PATH (scripts/h200_run.sh installs it).
# Writes under ${OUT:-./h200-out}/runner/.
set -uo pipefail
OUT=${OUT:-$PWD/h200-out}; R=$OUT/runner; mkdir -p "$R"
Q=index,name,compute_cap,memory.total,driver_version
nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits > "$R/smi-gpus.csv" 2>&1
nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total,temperature.gpu,power.draw,pstate,clocks.sm,clocks.mem \
  --format=csv,noheader,nounits > "$R/smi-state.csv" 2>&1
{ nvcc --version; echo ---; nvcc --list-gpu-code; } > "$R/nvcc.txt" 2>&1
step() {  # step NAME EXPECTED_RC command…: run, keep its output, say whether the exit code was expected
  local name=$1 want=$2; shift 2
  "$@" > "$R/$name.log" 2>&1; local rc=$?
  echo "$name: rc=$rc (expected $want) $([ "$rc" = "$want" ] && echo ok || echo UNEXPECTED)" | tee -a "$R/summary.txt"
}
: > "$R/summary.txt"
for src in auto nvml nvidia-smi none; do
  step "detect-$src" 0 env LAWBENCH_GPU_DETECT=$src lawbench profiles detect --json
done
# NVML hidden (nvidia-smi alone) must still recognise the H200 and let its --strict job run.
step strict-h200-via-smi 0 env LAWBENCH_GPU_DETECT=nvidia-smi lawbench run --profile h200 --strict -k prediction --out "$R/run-smi" --no-history
# No GPU visible at all: the h200 job fails with the reasons instead of skipping.
step strict-h200-no-gpu 1 env LAWBENCH_GPU_DETECT=none lawbench run --profile h200 --strict -k prediction --out "$R/run-none" --no-history
# A GPU, but not the profile's: the gtx1060 job is refused on an H200.
step strict-gtx1060-on-h200 1 lawbench run --profile gtx1060 --strict -k prediction --out "$R/run-1060" --no-history
# CUDA 13 cannot build for Pascal (sm_61): refused before cmake, naming the toolkit that can.
step cuda-arch-61 1 lawbench engine build llama.cpp --backend cuda --cuda-arch 61 --json
cat "$R/summary.txt"
