"""A command a plugin adds to the `lawbench` command line, yielded by the `lawbench_commands` hook.

    @lawbench.hookimpl
    def lawbench_commands():
        yield lawbench.Command("predict", "price a model's decode speed", add_arguments, run)

core builds the sub-parser; ``run(args)`` returns the exit code (0 ok, 1 bad result, 2 bad input)
and raises a LawbenchError for anything the user must fix, which core turns into one line.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from typing import Callable

NAME_RE = re.compile(r"^[a-z][a-z0-9-]*( [a-z][a-z0-9-]*)?$")
# core's command groups a plugin may add an action to, with a two-word name ("census run")
GROUPS = ("census",)


@dataclass(frozen=True)
class Command:
    """A sub-command a plugin adds (the ``lawbench_commands`` hook): ``run(args)`` returns the exit code."""

    name: str  # the sub-command: lower-case; one that core or an earlier plugin has is set aside; "group action" joins a GROUPS group
    help: str  # one line for `lawbench --help`
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str = field(default="")  # the sub-command's own --help text (default: help)


def whole_number(minimum: int = 0) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number >= ``minimum``; argparse names the flag on error
    (``--ctx: must be 0 or more, got -5``), exit 2."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, got {value}")
        return value

    parse.__name__ = "whole number"  # argparse's fallback message names the type
    return parse


def number_between(low: float, high: float, what: str, example: str) -> Callable[[str], float]:
    """An argparse ``type`` for a finite number strictly between ``low`` and ``high`` (a ratio, a
    confidence, a window in hours); the message says what the number is, with an example."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number (e.g. {example})") from None
        if not (low < value < high):  # NaN fails every comparison, so it lands here too
            raise argparse.ArgumentTypeError(f"{text!r}: {what} (e.g. {example})")
        return value

    parse.__name__ = "number"
    return parse
