# llama.cpp b11434 CPU build, as decode_slots.jsonl.cmd; a prefill-only cell prints speed_tg as -nan (not JSON); stdout only
llama-batched-bench -m /tmp/issue9/xwork/syn/synthetic-8913cf28e8765abe-F16.gguf --output-format jsonl -npp 16,16,16 -ntg 0 -npl 1 -c 16 -t 1
