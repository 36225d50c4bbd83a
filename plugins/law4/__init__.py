"""Law 4 — decode speed is a placement identity (seed 000): registers the law and `lawbench predict`.

The law lives in `law.py`; its arithmetic in `pricing.py`; model shapes in `shape.py` (from a GGUF
header) and `manifest.py` (from anchors/manifests/*.toml); `lawbench predict` in `cli.py`.
"""
from __future__ import annotations

from lawbench import Command, hookimpl


@hookimpl
def lawbench_laws():
    from lawbench.plugins.law4.law import Law4

    yield Law4


@hookimpl
def lawbench_commands():
    from lawbench.plugins.law4 import cli

    yield Command("predict", cli.HELP, cli.add_arguments, cli.predict_command, description=cli.__doc__)
