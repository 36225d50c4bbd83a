"""Every lawbench name is imported from the module that defines it (issue 33).

A module that re-exports what it imported so that old imports keep working ("stays importable from
here") is a second address for one name: the two drift apart, and the import graph shows an edge
that is not a use. The public modules under src/lawbench are the one place that publishes names
defined elsewhere, and a package's __init__ may gather its own.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"lawbench": ROOT / "src" / "lawbench", "lawbench.core": ROOT / "core", "lawbench.plugins": ROOT / "plugins"}
IMPORTERS = ("core", "plugins", "src", "tests", "benchmarks", "examples")

# Importers of these still go through a module that only imports the name; each lives in files that
# other branches of issue 33 are changing (core/record/, core/run/resources.py, core/history/,
# core/store/catalog.py). A list that only shrinks: an entry that is fixed fails below.
STILL_REEXPORTED = {
    "lawbench.core.history.store.Binding",
    "lawbench.core.history.store.Provenance",
    "lawbench.core.history.store.ResultRow",
    "lawbench.core.history.store.RunRow",
    "lawbench.core.history.store.default_path",
    "lawbench.core.history.store.engine_key",
    "lawbench.core.record.reports.RunRecord",
    "lawbench.core.record.reports.git_commit",
    "lawbench.core.record.reports.interrupt_exit_code",
    "lawbench.core.record.reports.is_retired",
    "lawbench.core.record.reports.lawbench_version",
    "lawbench.core.record.reports.parse_record_time",
    "lawbench.core.record.reports.utc_now",
}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg, folder in FOLDERS.items():
        for f in folder.rglob("*.py"):
            parts = [p for p in f.relative_to(folder).with_suffix("").parts if p != "__init__"]
            mods[".".join([pkg, *parts])] = f
    return mods


def _defined(path: Path) -> set[str]:
    """The names a module binds itself: functions, classes, assignments (under `if`/`try` too)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return out


def reimported() -> dict[str, list[str]]:
    """"module.name" -> where it is imported from a module that only imports it itself."""
    mods = _modules()
    defined: dict[str, set[str]] = {}
    found: dict[str, list[str]] = {}
    for folder in IMPORTERS:
        for path in (ROOT / folder).rglob("*.py"):
            if {".nox", "build"} & set(path.relative_to(ROOT).parts):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.ImportFrom) and node.module in mods):
                    continue
                source = mods[node.module]
                if source.name == "__init__.py" or source.parent == FOLDERS["lawbench"]:
                    continue  # a package gathering its own names; the public surface
                if node.module not in defined:
                    defined[node.module] = _defined(source)
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if alias.name not in defined[node.module] and full not in mods:
                        found.setdefault(full, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_names_are_imported_from_where_they_are_defined():
    found = reimported()
    new = {name: where for name, where in found.items() if name not in STILL_REEXPORTED}
    assert not new, ("imported from a module that only imports them; import each from the module "
                     f"that defines it: {new}")
    fixed = STILL_REEXPORTED - set(found)
    assert not fixed, f"no longer re-exported: take {sorted(fixed)} off STILL_REEXPORTED"


def test_the_check_sees_a_reexport(tmp_path, monkeypatch):
    """A module that imports a name and a caller that takes it from there is found."""
    core = tmp_path / "core"
    (core / "x").mkdir(parents=True)
    (core / "x" / "a.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    (core / "x" / "b.py").write_text("from lawbench.core.x.a import f  # stays importable\n", encoding="utf-8")
    (core / "x" / "c.py").write_text("from lawbench.core.x.b import f\nfrom lawbench.core.x.a import f as g\n",
                                     encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "FOLDERS", {"lawbench.core": core, "lawbench": tmp_path / "src"})
    assert reimported() == {"lawbench.core.x.b.f": ["core/x/c.py:1"]}
