"""The minfer engine law (seed 002). Registers only; the law lives in lawbench.plugins.minfer.law.

Runners set LAWBENCH_MINFER_CMD to the engine command; what it must speak is the lawbench minfer
contract, docs/minfer-contract.md.
"""
from lawbench import Command, hookimpl


@hookimpl
def lawbench_laws():
    from lawbench.plugins.minfer.law import Minfer

    yield Minfer


@hookimpl
def lawbench_commands():
    from lawbench.plugins.minfer import census_cli

    # `lawbench census run -- COMMAND`: the census of any command that speaks the contract
    yield Command("census run", census_cli.HELP, census_cli.add_arguments, census_cli.cmd_run,
                  description=census_cli.__doc__)
