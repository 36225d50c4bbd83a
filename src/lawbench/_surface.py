"""Lazy re-exports for lawbench's public modules: a name is looked up in the module that defines it
when it is asked for, so `import lawbench.engines` costs nothing until a law asks for an engine.
Nothing is cached here: a test that monkeypatches the defining module is seen by every law."""
from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy(module_name: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a public module.

    :param exports: public name -> "module" (the same name there) or "module:name" (another name,
        or a module itself when the name is empty: "lawbench.core.hardware.pagecache:").
    """

    def __getattr__(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        where, colon, attr = target.partition(":")
        module = importlib.import_module(where)
        return module if colon and not attr else getattr(module, attr or name)

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
