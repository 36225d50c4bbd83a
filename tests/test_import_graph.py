"""lawbench's modules import each other without a cycle — lazy imports inside functions included,
since a lazy import that closes a cycle only moves the failure to whichever module loads first."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The import name -> the folder the design card keeps it in (pyproject's package-dir).
FOLDERS = {"lawbench": ROOT / "src" / "lawbench", "lawbench.core": ROOT / "core", "lawbench.plugins": ROOT / "plugins"}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg, folder in FOLDERS.items():
        for f in folder.rglob("*.py"):
            parts = [p for p in f.relative_to(folder).with_suffix("").parts if p != "__init__"]
            mods[".".join([pkg, *parts])] = f
    return mods


def _runtime_imports(tree: ast.AST) -> list[ast.AST]:
    """Import nodes, leaving out `if TYPE_CHECKING:` blocks (never executed)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps: set[str] = set()
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:  # `from pkg import submodule` imports the submodule
                    target = f"{node.module}.{alias.name}"
                    deps.add(target if target in mods else node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[name] = {d for d in deps if d in mods and d != name and not name.startswith(d + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_pytest_plugin_loads_the_session_and_never_the_reverse():
    graph = import_graph()
    assert "lawbench.core.run.session" in graph["lawbench.core.run.pytest_plugin"]
    assert "lawbench.core.run.pytest_plugin" not in graph["lawbench.core.run.session"]
    assert "lawbench.core.run.pytest_plugin" not in graph["lawbench.core.run.items"]


# --------------------------------------------------------------------------- layers
# Core names no law; a built-in law is written like a third party's (docs/contributing-a-law.md):
# it imports `lawbench` and its public modules, and its own package, nothing else of lawbench.

_DOTTED = re.compile(r"lawbench(\.\w+)+")


def imported_names() -> dict[str, set[str]]:
    """Every lawbench name each module imports (lazy imports inside functions included), and every
    string that is a whole lawbench module path (what importlib.import_module would be handed)."""
    out: dict[str, set[str]] = {}
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names: set[str] = set()
        for node in _runtime_imports(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _DOTTED.fullmatch(node.value):
                names.add(node.value)
        out[name] = {n for n in names if n == "lawbench" or n.startswith("lawbench.")}
    return out


def _plugin_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["lawbench", "plugins"] else None


def layer_violations(imports: dict[str, set[str]], builtins: tuple[str, ...]) -> list[str]:
    """One line per import that breaks a layer rule:
    core imports no plugin (the registry names the built-ins, by module name, and only there);
    no plugin imports another plugin; no built-in law imports lawbench.core."""
    found = []
    for module, names in sorted(imports.items()):
        mine = _plugin_of(module)
        for name in sorted(names):
            if module.startswith("lawbench.core") and _plugin_of(name) is not None:
                if not (module == "lawbench.core.laws.registry" and name in builtins):
                    found.append(f"{module} (core) imports {name}")
            if mine is not None:
                other = _plugin_of(name)
                if other is not None and other != mine:
                    found.append(f"{module} (plugin {mine}) imports plugin {other}: {name}")
                if name == "lawbench.core" or name.startswith("lawbench.core."):
                    found.append(f"{module} (plugin {mine}) imports core: {name}; use lawbench's public surface")
    return found


def test_core_names_no_law_and_laws_use_only_the_public_surface():
    from lawbench.core.laws.registry import BUILTIN_PLUGINS

    assert layer_violations(imported_names(), BUILTIN_PLUGINS) == []


def test_the_layer_rules_catch_each_kind_of_import():
    builtins = ("lawbench.plugins.law4",)
    imports = {
        "lawbench.core.laws.registry": {"lawbench.plugins.law4"},  # the list of built-ins: allowed
        "lawbench.core.run.ab": {"lawbench.plugins.law4.case"},
        "lawbench.plugins.law3.law": {"lawbench.plugins.law4.measure", "lawbench.plugins.law3.case"},
        "lawbench.plugins.law4.law": {"lawbench.core.errors", "lawbench", "lawbench.engines"},
    }
    assert layer_violations(imports, builtins) == [
        "lawbench.core.run.ab (core) imports lawbench.plugins.law4.case",
        "lawbench.plugins.law3.law (plugin law3) imports plugin law4: lawbench.plugins.law4.measure",
        "lawbench.plugins.law4.law (plugin law4) imports core: lawbench.core.errors; use lawbench's public surface",
    ]


def test_the_scan_sees_lazy_imports_and_module_strings():
    imports = imported_names()
    assert "lawbench.plugins.law4" in imports["lawbench.core.laws.registry"]  # a string in BUILTIN_PLUGINS
    assert "lawbench.engines" in imports["lawbench.plugins.law4.measure"]  # imported inside a function


# --------------------------------------------------------------------------- one run, one lifecycle


def _calls(pattern: str) -> dict[str, int]:
    """Package source files (core, plugins, src) holding ``pattern`` (a regex), with the count, by
    path relative to the repository root; comments and docstrings are left out of the search."""
    import io
    import re
    import tokenize

    found = {}
    for folder in FOLDERS.values():
        for f in sorted(folder.rglob("*.py")):
            code = []
            for tok in tokenize.generate_tokens(io.StringIO(f.read_text(encoding="utf-8")).readline):
                if tok.type == tokenize.COMMENT:
                    continue
                if tok.type == tokenize.STRING and tok.string.startswith(('"""', "'''")):
                    continue  # a docstring may name a call without making it
                code.append(tok.string)
            n = len(re.findall(pattern, " ".join(code)))
            if n:
                found[str(f.relative_to(ROOT))] = n
    return found


def test_stop_signal_handlers_are_installed_in_one_module():
    """SIGINT / SIGTERM / SIGHUP handlers are lawbench.core.run.signals' alone: `lawbench`'s main installs
    them once per command, and a Run takes them over (installing them itself only under a bare pytest)."""
    assert set(_calls(r"\bsignal \. signal \(")) == {"core/run/signals.py"}
    assert set(_calls(r"\bStopSignals \(")) == {"core/run/signals.py"}
    assert set(_calls(r"\bsignals \. install \(")) == {"core/commands/main.py", "core/run/run.py"}


def test_a_runs_exit_code_is_decided_in_one_place():
    """RunRecord.finish (with judged_bad) is the one rule for a run's exit code, and Run.finish the
    one caller for a live run of any mode (run, ab, census plant): no command computes its own."""
    assert set(_calls(r"\. exit_code = [^=]")) == {"core/models/run_record.py"}
    assert set(_calls(r"\bjudged_bad \(")) == {"core/models/run_record.py", "core/record/checks.py"}
    # a new record is made and finished by the Run alone; core/record/ab_json.py converts an old ab.json with the same rule
    assert set(_calls(r"\bRunRecord \. new \(")) == {"core/run/run.py"}
    assert set(_calls(r"\brecord \. finish \(")) == {"core/run/run.py", "core/record/ab_json.py"}
    # 128 + the signal's number: the record's rule, the import check of it, and main for a command
    # stopped outside any run (an engine build, a download)
    assert set(_calls(r"\binterrupt_exit_code \(")) == {"core/models/run_record.py", "core/record/checks.py",
                                                       "core/commands/main.py"}


def test_the_cli_never_fishes_the_record_out_of_pytest():
    assert _calls(r"\bsession \. record\b") == {}
    graph = import_graph()  # the Run knows nothing of pytest, its front end for `lawbench run`
    front = {"lawbench.core.run.session", "lawbench.core.run.items", "lawbench.core.run.pytest_plugin"}
    for module in ("lawbench.core.run", "lawbench.core.run.run", "lawbench.core.run.context"):
        assert not graph[module] & front, module


# --------------------------------------------------------------------------- core's folders are its layers
# Each folder of core imports only the folders CORE_LAYERS lists for it (lazy imports included); the
# shared leaves at core's top (errors, paths, toml_read, cpus, lock …) import no folder. Read top
# down, every folder leans only on folders further down the table: a DAG, and
# test_the_layer_table_has_no_cycle keeps it one. commands/ sits on top: nothing imports it but the
# `lawbench` entry point. laws/ (the Law interface and the Resources its methods are handed) sits
# above the engines and the model store it hands out; the folders beneath it are handed what the
# registry knows (a profile its laws, the store its plugin catalogues) and never ask for it.
CORE_LAYERS = {
    "commands": {"run", "html", "history", "record", "laws", "engines", "store", "claims", "hardware",
                 "stats", "models"},
    "run": {"html", "history", "record", "laws", "engines", "store", "claims", "hardware", "stats", "models"},
    "html": {"history", "record", "models"},
    "history": {"record", "laws", "claims", "hardware", "models"},
    # engines: the load-log parser's census_amount
    "record": {"laws", "engines", "stats", "models"},
    "laws": {"engines", "store", "hardware", "models"},
    "engines": {"store", "hardware", "stats", "models"},
    "store": {"models"},
    "claims": {"models"},
    "stats": {"hardware", "models"},
    "hardware": {"models"},
    "models": set(),
}


def _folder(module: str) -> str | None:
    """The core folder a module sits in ("" for a shared leaf at core's top, None outside core)."""
    parts = module.split(".")
    if parts[:2] != ["lawbench", "core"]:
        return None
    return parts[2] if len(parts) > 2 and (ROOT / "core" / parts[2] / "__init__.py").exists() else ""


def folder_violations(imports: dict[str, set[str]]) -> list[str]:
    found = []
    for module, names in sorted(imports.items()):
        mine = _folder(module)
        if mine is None:
            continue
        allowed = CORE_LAYERS.get(mine, set()) | {mine, ""}
        for name in sorted(names):
            theirs = _folder(name)
            if theirs is not None and theirs not in allowed:
                found.append(f"{module} ({mine or 'core'}/) imports {name} ({theirs}/)")
    return found


def test_core_folders_import_only_the_layers_beneath_them():
    assert set(CORE_LAYERS) | {""} >= {_folder(m) for m in _modules() if m.startswith("lawbench.core.")}
    assert folder_violations(imported_names()) == []


def test_nothing_but_the_entry_point_imports_a_command():
    users = {m for m, names in imported_names().items()
             if _folder(m) != "commands" and any(_folder(n) == "commands" for n in names)}
    assert users == set()
    assert "lawbench.core.commands.main:main" in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_the_folder_rule_catches_an_upward_import():
    imports = {"lawbench.core.stats.verdicts": {"lawbench.core.commands.main", "lawbench.core.errors"},
               "lawbench.core.errors": {"lawbench.core.run.plan"}}
    assert folder_violations(imports) == [
        "lawbench.core.errors (core/) imports lawbench.core.run.plan (run/)",
        "lawbench.core.stats.verdicts (stats/) imports lawbench.core.commands.main (commands/)",
    ]


# --------------------------------------------------------------------------- the table is a DAG
# CORE_LAYERS read as a graph of folders: a cycle in it would let two folders lean on each other
# and no import would ever be refused between them.


def test_the_layer_table_has_no_cycle():
    assert cycles({folder: set(below) for folder, below in CORE_LAYERS.items()}) == []


def test_the_layer_table_check_catches_a_planted_cycle():
    planted = {folder: set(below) for folder, below in CORE_LAYERS.items()}
    planted["models"] = planted["models"] | {"store"}  # the store reads models: now models the store too
    assert cycles(planted) == [["models", "store"]]


# --------------------------------------------------------------------------- edges that hide
# A function-level import and an `Any` parameter each hide an edge from the table: the import from
# this scan's first glance at a module's head, the parameter from every type checker. Their counts
# may go down, never up (quantprobe's ratchet): lower the ceiling when they fall.
HIDDEN_CEILING = {"function-level imports": 377, "Any parameters": 326}


def _mentions_any(annotation: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "Any" or isinstance(n, ast.Attribute) and n.attr == "Any"
               or isinstance(n, ast.Constant) and isinstance(n.value, str) and "Any" in n.value
               for n in ast.walk(annotation))


def hidden_edges(folders: tuple[str, ...] = ("core", "plugins")) -> dict[str, int]:
    """Import statements inside a function body, and function parameters whose annotation names
    ``Any``, in the package folders given (relative to the repository root)."""
    lazy = any_params = 0
    for folder in folders:
        for f in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(f.read_text(encoding="utf-8"))
            for fn in ast.walk(tree):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                a = fn.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                any_params += sum(1 for p in params if p is not None and p.annotation is not None
                                  and _mentions_any(p.annotation))
                # this function's own imports (a nested function's are counted once, with that function)
                todo = list(ast.iter_child_nodes(fn))
                while todo:
                    node = todo.pop()
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        lazy += 1
                    elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        todo.extend(ast.iter_child_nodes(node))
    return {"function-level imports": lazy, "Any parameters": any_params}


def test_hidden_edges_go_down_not_up():
    counts = hidden_edges()
    print(f"core/ + plugins/: {counts}; ceiling {HIDDEN_CEILING}")
    for what, n in counts.items():
        assert n <= HIDDEN_CEILING[what], f"{what}: {n} > the ceiling {HIDDEN_CEILING[what]}; import at the " \
                                          f"module's head, or name the type"


def test_the_hidden_edge_count_sees_both_kinds(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "import os\nfrom typing import Any\n\n\ndef f(a: Any, b: 'Optional[Any]', c: int, *d: typing.Any):\n"
        "    import json\n\n    def g(e):\n        from os import path\n    return json\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert hidden_edges(("pkg",)) == {"function-level imports": 2, "Any parameters": 3}
