"""Quality cost: perplexity deltas, their ratios and KL divergence on a named text. Registers only;
the law lives in lawbench.plugins.quality.law, the case tables in .case."""
from lawbench import hookimpl


@hookimpl
def lawbench_laws():
    from lawbench.plugins.quality.law import Quality

    yield Quality
