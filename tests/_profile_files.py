"""Profile files written by the tests: a minimal good profile, and the one-line error a broken one
must give. Shared by tests/test_profiles.py (core's profile format) and tests/test_law4_profile.py
(Law 4's `[laws.law4]` table)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from lawbench.core.errors import DataError
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.laws.registry import get_registry

GOOD = """
id = "{id}"
description = "a test box"
[fingerprint]
cpu_model_contains = "Test CPU"
[[tiers]]
name = "ram"
kind = "ram"
bandwidth_spec_gbs = {{ value = 10.0, source = "test" }}
[laws.law4.eta]
ram = {{ value = 0.5, source = "test", basis = "spec" }}
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def broken(tmp_path: Path, text: str) -> DataError:
    """The error loading ``text`` as a profile gives: one line, naming the file, no traceback."""
    path = write(tmp_path, "broken.toml", text)
    with pytest.raises(DataError) as err:
        load_profiles([tmp_path], get_registry().laws)  # each law checks its own table
    message = str(err.value)
    assert str(path) in message, message
    assert "\n" not in message and "Traceback" not in message and "pydantic" not in message
    return err.value
