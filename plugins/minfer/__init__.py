"""The minfer engine law (seed 002). Registers only; the law lives in lawbench.plugins.minfer.law.

Runners set LAWBENCH_MINFER_CMD to the engine command; its contract is documented in
lawbench.plugins.minfer.engine.
"""
from lawbench.core.hookspecs import hookimpl


@hookimpl
def lawbench_laws():
    from lawbench.plugins.minfer.law import Minfer

    yield Minfer
