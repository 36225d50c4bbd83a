"""A small TOML writer for profiles, so `profiles measure` needs no extra dependency.

Covers what a profile holds: strings, numbers, booleans, lists of scalars, tables, arrays of
tables. A table whose values are all scalars (a Fact) is written inline, as the shipped files do.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def dumps(data: dict[str, Any]) -> str:
    lines: list[str] = []
    _table(data, [], lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _table(data: dict[str, Any], path: list[str], lines: list[str]) -> None:
    nested = []
    for key, value in data.items():
        # Top-level tables ([fingerprint], [laws]) always get a header: easier to read and edit.
        if _is_section(value) or _is_table_array(value) or (not path and isinstance(value, dict)):
            nested.append((key, value))
        elif isinstance(value, list) and len(_value(value)) > 100:  # long notes: one per line
            lines += [f"{_key(key)} = ["] + [f"    {_value(v)}," for v in value] + ["]"]
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in nested:
        sub = path + [key]
        if _is_table_array(value):
            for item in value:
                lines += ["", f"[[{'.'.join(map(_key, sub))}]]"]
                _table(item, sub, lines)
        else:
            lines += ["", f"[{'.'.join(map(_key, sub))}]"]
            _table(value, sub, lines)


def _is_section(value: Any) -> bool:
    """A dict written as its own [section]: one that holds further tables, or is empty."""
    return isinstance(value, dict) and (not value or any(isinstance(v, dict) for v in value.values()))


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON escapes are valid TOML escapes
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")
