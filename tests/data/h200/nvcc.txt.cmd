nvcc --version; echo ---; nvcc --list-gpu-code   # CUDA 13.0 on the H200 machine, 2026-12-01
