import lawbench
from lawbench_dummy.law import Dummy


@lawbench.hookimpl
def lawbench_laws():
    yield Dummy
