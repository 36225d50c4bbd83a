"""Law 1 (seed 000): incoherence rotation helps full-rank tensors and destroys low-rank bottlenecks.

Registers only; the law lives in lawbench.plugins.law1.law, its model in .predict, the tensor
arithmetic in .gauges, real tensors in .tensors, the measurement in .measure, the fake-quantized
GGUF writer in .fakequant.
"""
from lawbench import hookimpl


@hookimpl
def lawbench_laws():
    from lawbench.plugins.law1.law import Law1

    yield Law1
