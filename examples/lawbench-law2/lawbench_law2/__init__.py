"""lawbench-law2: seed 000's Law 2 as a third-party lawbench plugin.

"Routed experts sit exactly at the Gaussian rate-distortion floor (rel-MSE 0.069 = D(R=2))": the
law predicts a codec's relative MSE from its rate alone (lawbench_law2.theory), and measures it by
quantizing real tensors of real GGUF files with the engine's own codecs (lawbench_law2.codecs).
Registered by lawbench_law2.plugin through the `lawbench` entry-point group.
"""
