nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version --format=csv,noheader,nounits   # NVIDIA H200, driver 580.159.04, 2026-12-01 (scripts/h200_runner_checks.sh)
