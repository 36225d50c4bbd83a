"""Functions and classes that nothing uses, and those only tests use (issue 33).

A module-level ``def``/``class`` of core/, plugins/ or examples/ counts as referenced where its
name appears anywhere else: as a name in Python code (tests/, benchmarks/, noxfile.py included), or as
a word inside a string of Python code or of a TOML / YAML / shell file (entry points, the surface's
"module:name" tables, workflows). Pluggy hooks and pytest hooks/fixtures are called by name and left
out. A name used in two places counts for both, so the lists err towards "used".

    python scripts/unreferenced.py          # prints both lists and their counts
"""
from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ("core", "plugins", "src", "examples")
SKIP_PARTS = {".nox", "build", "__pycache__", ".git", "node_modules"}
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _files(*suffixes: str):
    for path in ROOT.rglob("*"):
        if path.suffix in suffixes and path.is_file() and not SKIP_PARTS & set(path.relative_to(ROOT).parts):
            yield path


def _is_test(path: Path) -> bool:
    rel = path.relative_to(ROOT).parts
    return rel[0] == "tests" or "tests" in rel[:-1] or path.name.startswith("test_") or path.name == "conftest.py"


def _words(path: Path) -> Counter:
    """A Python file's names, attributes, imported names and the words of its strings (docstrings
    and comments left out: a mention is not a use); every word of another file."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".py":
        return Counter(WORD.findall(text))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return Counter(WORD.findall(text))
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docstrings.add(id(body[0].value))
    out: Counter = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out[node.id] += 1
        elif isinstance(node, ast.Attribute):
            out[node.attr] += 1
        elif isinstance(node, ast.alias):
            out.update(node.name.split("."))
            if node.asname:
                out[node.asname] += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            out.update(WORD.findall(node.value))
    return out


def _called_by_name(node: ast.AST) -> bool:
    if node.name.startswith(("lawbench_", "pytest_", "__")):
        return True
    for dec in getattr(node, "decorator_list", []):
        src = ast.unparse(dec)
        if "hookimpl" in src or "fixture" in src or "hookspec" in src:
            return True
    return False


def definitions() -> list[tuple[str, Path, int]]:
    out = []
    for folder in SOURCE:
        for path in (ROOT / folder).rglob("*.py"):
            if SKIP_PARTS & set(path.relative_to(ROOT).parts) or _is_test(path) or folder == "src":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not _called_by_name(node):
                    out.append((node.name, path, node.lineno))
    return out


def main() -> int:
    code: Counter = Counter()
    tests: Counter = Counter()
    surface: Counter = Counter()  # src/lawbench: naming a core name there publishes it, it does not use it
    for path in _files(".py", ".toml", ".yml", ".yaml", ".sh", ".cfg"):
        where = tests if _is_test(path) else surface if path.is_relative_to(ROOT / "src") else code
        where.update(_words(path))
    defs = definitions()
    defined = Counter(name for name, _, _ in defs)
    dead, test_only, published = [], [], []
    for name, path, line in defs:
        if code[name] > 0:
            continue
        where = f"{path.relative_to(ROOT)}:{line} {name}"
        (published if surface[name] else test_only if tests[name] else dead).append(where)
    print(f"referenced nowhere ({len(dead)}):")
    print("\n".join(f"  {d}" for d in sorted(dead)))
    print(f"referenced only by tests ({len(test_only)}):")
    print("\n".join(f"  {d}" for d in sorted(test_only)))
    print(f"published (src/lawbench) and used by no law, command or core module ({len(published)}):")
    print("\n".join(f"  {d}" for d in sorted(published)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
