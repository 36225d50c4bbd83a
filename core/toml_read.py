"""lawbench's one TOML reader: anchors, profiles, model catalogues, the inventory, stakes and the
gate's files all parse through read_toml, so every fault reads the same and names the file.

A shared leaf at core's top (it imports no folder of core): claims/, hardware/ and store/ each read
TOML, and none of them may lean on another to do it."""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

from lawbench.core.errors import DataError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def read_toml(path: Any) -> dict:
    """Parse one TOML file (a path or an importlib.resources Traversable). Every fault is a
    DataError naming the file: missing, not a regular file, unreadable, not UTF-8, malformed, or
    nested too deep for the parser."""
    name = str(path)
    if isinstance(path, (str, os.PathLike)):
        path = Path(path)
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            raise DataError(name, "file not found") from None
        except OSError as exc:
            raise DataError(name, f"cannot read the file: {exc.strerror or exc}") from None
        if not stat.S_ISREG(mode):  # a folder, a named pipe (reading it would wait forever), a device
            raise DataError(name, "not a regular file; give the path of a .toml file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(name, "file not found") from None
    except UnicodeDecodeError as exc:
        raise DataError(name, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DataError(name, f"cannot read the file: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DataError(name, f"malformed TOML: {exc}") from None
    except RecursionError:
        raise DataError(name, "arrays or tables nested too deeply to parse (hundreds of levels); "
                              "a TOML data file needs a few") from None
