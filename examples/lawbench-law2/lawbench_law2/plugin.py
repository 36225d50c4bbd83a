"""The entry point lawbench loads: registers the law and its `rd-table` command, nothing else."""
import lawbench
from lawbench_law2.law import RateDistortion
from lawbench_law2.table import RdTable


@lawbench.hookimpl
def lawbench_laws():
    yield RateDistortion


@lawbench.hookimpl
def lawbench_commands():
    yield RdTable()
