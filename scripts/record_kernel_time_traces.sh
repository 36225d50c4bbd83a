#!/usr/bin/env bash
# Writes OUTDIR/trace2-q6k-<arm>-run<i>.tsv on a CUDA machine: lawbench's kernel tracer (format 2)
# over the q6_K stand-in program (tests/standin/q6k_kernel_standin.cu), three runs of each arm:
# exp1 (gates unset), exp0 (MINFER_MMQ_Q6K_EXP=0), nb0 (MINFER_MMQ_Q6K_NB=0), nb1 (MINFER_MMQ_Q6K_NB=1).
# Usage: scripts/record_kernel_time_traces.sh OUTDIR   (needs nvcc, g++ and the toolkit's CUPTI)
set -euo pipefail
out=${1:?OUTDIR}
mkdir -p "$out"
root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
inc=$(dirname "$(find "$root" -name cupti_activity.h | head -1)")
lib=$(dirname "$(find "$root" -name 'libcupti.so*' | head -1)")
krec=$(grep -ho 'CUpti_ActivityKernel[0-9]*\s*;' "$inc"/cupti_activity*.h | grep -o '[0-9]*' | sort -n | tail -1)
g++ -O2 -shared -fPIC -std=c++17 -DKREC=CUpti_ActivityKernel$krec -I"$inc" -I"$root/include" \
    core/engines/kernel_tracer.cpp -o "$out/tracer.so" -L"$lib" -lcupti -Wl,-rpath,"$lib"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
nvcc -O2 -arch=sm_$cc -o "$out/q6k_standin" tests/standin/q6k_kernel_standin.cu
unset MINFER_MMQ_Q6K_EXP MINFER_MMQ_Q6K_NB
for i in 1 2 3; do
  for arm in exp1 exp0 nb0 nb1; do
    case $arm in
      exp1) set -- ;;
      exp0) set -- MINFER_MMQ_Q6K_EXP=0 ;;
      nb0) set -- MINFER_MMQ_Q6K_NB=0 ;;
      nb1) set -- MINFER_MMQ_Q6K_NB=1 ;;
    esac
    env "$@" CUDA_INJECTION64_PATH="$out/tracer.so" LAWBENCH_KERNEL_TRACE_OUT="$out/trace2-q6k-$arm-run$i.tsv" \
      "$out/q6k_standin"
  done
done
echo "krec=CUpti_ActivityKernel$krec cc=$cc"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc --version | tail -1
