nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total,temperature.gpu,power.draw,pstate,clocks.sm,clocks.mem --format=csv,noheader,nounits   # same machine
