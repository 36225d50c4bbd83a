from lawbench.core.hookspecs import hookimpl
from lawbench_dummy.law import Dummy


@hookimpl
def lawbench_laws():
    yield Dummy
