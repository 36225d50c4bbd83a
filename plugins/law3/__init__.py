"""Law 3 (seed 000): depth fragility. Registers only; the law lives in lawbench.plugins.law3.law,
the recipe files in .recipe, the case tables in .case."""
from lawbench import hookimpl


@hookimpl
def lawbench_laws():
    from lawbench.plugins.law3.law import Law3

    yield Law3
