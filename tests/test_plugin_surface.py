"""The plugin surface a contributor sees: public imports only, broken siblings set aside by
distribution name, every anchor's case checked by its own law before anything runs."""
from __future__ import annotations

import ast
import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import HERE, pip_install_into, run_cli, write_plugin

import lawbench

DUMMY_SRC = HERE / "plugins" / "lawbench-dummy"


def _env(cli_env: dict, *sites: Path) -> dict:
    env = dict(cli_env)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, sites), env["PYTHONPATH"]])
    return env


def test_every_public_name_resolves_and_is_documented():
    assert set(lawbench.__all__) == {"__version__", *lawbench._EXPORTS}
    for name in lawbench.__all__:
        assert getattr(lawbench, name) is not None, name
    assert set(dir(lawbench)) >= set(lawbench.__all__)
    for hook in ("lawbench_laws", "lawbench_profile_dirs", "lawbench_model_catalogs", "lawbench_commands",
                 "lawbench_run_finished"):
        assert hook in lawbench.__doc__, f"{hook} is not in the plugin guide (lawbench's docstring)"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        lawbench.Nope  # noqa: B018


@pytest.mark.parametrize("module", ["lawbench.engines", "lawbench.store", "lawbench.hardware", "lawbench.host"])
def test_every_name_of_a_public_module_resolves(module):
    """The built-in laws import these instead of lawbench.core: a name that moved in core must
    move here too, or every law that reads it breaks at its first use, not at import."""
    import importlib

    mod = importlib.import_module(module)
    assert mod.__all__ and set(dir(mod)) == set(mod.__all__)
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"{module}.{name}"
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        mod.Nope  # noqa: B018


PUBLIC_MODULES = ["lawbench", "lawbench.engines", "lawbench.store", "lawbench.hardware", "lawbench.host",
                  "lawbench.testing"]
GUIDE = HERE.parent / "docs" / "contributing-a-law.md"


def _guide_names() -> dict[str, list[str]]:
    """Step 10 of the plugin author's page: module -> the names its lines document, in order."""
    text = GUIDE.read_text(encoding="utf-8").split("## 10. Every public name", 1)[1]
    names: dict[str, list[str]] = {}
    module = None
    for line in text.splitlines():
        if line.startswith("### `"):
            module = line[5:line.index("`", 5)]
            names[module] = []
        elif line.startswith("- `") and module:
            name, _, doc = line[3:].partition("` — ")
            assert doc.strip(), f"{module}.{name}: no words after the name in {GUIDE.name}"
            names[module].append(name)
    return names


def test_every_public_name_is_documented_on_the_plugin_authors_page():
    """The surface is designed, not grown: a name joins a public module and the page together."""
    import importlib

    documented = _guide_names()
    assert list(documented) == PUBLIC_MODULES
    for module in PUBLIC_MODULES:
        public = set(importlib.import_module(module).__all__)
        listed = documented[module]
        assert len(listed) == len(set(listed)), f"{module}: a name listed twice"
        assert public - set(listed) == set(), f"{module}: public but not on {GUIDE.name}'s step 10"
        assert set(listed) - public == set(), f"{module}: on {GUIDE.name}'s step 10 but not public"
    everywhere = [n for names in documented.values() for n in names]
    twice = {n for n in everywhere if everywhere.count(n) > 1}
    assert not twice, f"public in two modules: {twice} (one home a name)"


@pytest.mark.parametrize("module", ["lawbench", "lawbench.engines", "lawbench.store", "lawbench.hardware",
                                    "lawbench.host"])
def test_no_public_name_is_a_private_helper_under_another_name(module):
    """A "module:name" target is a rename; a rename of a `_private` function publishes a helper that
    its module never promised to keep (as `process_fault` was bench.py's `_fault`)."""
    import importlib

    for name, target in importlib.import_module(module)._EXPORTS.items():
        where, _, attr = target.partition(":")
        assert not attr.startswith("_") and not any(p.startswith("_") for p in where.split(".")), \
            f"{module}.{name} is {target}: a private name"


# Defined in files another branch of issue 33 is moving (core/laws/law.py, core/hardware/): their
# docstrings come after that lands. A list that only shrinks: a name here that has one fails.
DOCSTRING_TO_COME = {"lawbench.Census", "lawbench.hardware.fingerprint_machine"}


def test_every_public_function_and_class_says_what_it_is():
    """A docstring of its own; a pydantic model is documented by its fields (docs/schema), and the
    page's line documents the rest (constants, annotated types, the hookimpl marker)."""
    import importlib
    import inspect

    from pydantic import BaseModel

    missing = []
    for module in PUBLIC_MODULES:
        mod = importlib.import_module(module)
        for name in mod.__all__:
            value = getattr(mod, name)
            if not (inspect.isfunction(value) or inspect.isclass(value)):
                continue
            if inspect.isclass(value) and issubclass(value, BaseModel):
                continue
            own = value.__doc__ if inspect.isfunction(value) else vars(value).get("__doc__")
            if not (own or "").strip() or (inspect.isclass(value) and own.startswith(f"{value.__name__}(")):
                missing.append(f"{module}.{name}")
    assert set(missing) - DOCSTRING_TO_COME == set(), "no docstring of their own"
    assert DOCSTRING_TO_COME - set(missing) == set(), "documented now: take them off DOCSTRING_TO_COME"


def test_the_third_party_law_imports_only_from_lawbench():
    """The test plugin is the smallest real law: it must need nothing behind `lawbench.`."""
    for path in (DUMMY_SRC / "lawbench_dummy").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                assert not name.startswith("lawbench."), f"{path.name} imports {name}: not public"


def test_broken_plugins_are_named_by_distribution_and_the_good_one_still_runs(cli_env, broken_site, tmp_path):
    env = _env(cli_env, broken_site)
    laws = run_cli(["laws"], env, tmp_path)
    assert laws.returncode == 0, laws.stderr
    assert "Traceback" not in laws.stderr + laws.stdout
    assert any(line.startswith("dummy") for line in laws.stdout.splitlines())
    assert any(line.startswith("law4") for line in laws.stdout.splitlines())
    warnings = [line for line in laws.stderr.splitlines() if "broken plugin" in line]
    assert len(warnings) == 2, laws.stderr
    assert all("distribution lawbench-broken 0.2.0" in w for w in warnings)
    assert any("ModuleNotFoundError" in w and "lawbench_not_installed_anywhere" in w for w in warnings)
    assert any("lawbench_laws() raised RuntimeError: the author's bug" in w for w in warnings)

    # `check` validates the rest, then fails on the broken plugins: a checker never says ok to them.
    check = run_cli(["check"], env, tmp_path)
    assert check.returncode == 2 and "Traceback" not in check.stderr
    assert "2 plugin problem(s)" in check.stderr and "anchors" in check.stderr

    # The good plugin's anchors run for real beside them.
    out = tmp_path / "out"
    run = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", str(out), "--no-history"], env, tmp_path)
    assert "Traceback" not in run.stdout + run.stderr
    assert run.returncode == 1, run.stdout[-2000:]  # dummy.sum-fail is a real FAIL
    verdicts = {r["anchor_id"]: r["verdict"] for r in json.loads((out / "run.json").read_text(encoding="utf-8"))["results"]}
    assert verdicts["dummy.sum-pass"] == "PASS" and verdicts["dummy.sum-fail"] == "FAIL"


def _dummy_with(tmp_path: Path, old: str, new: str) -> Path:
    """The test plugin with one edit in its anchor file, really pip-installed."""
    src = tmp_path / "src"
    shutil.copytree(DUMMY_SRC, src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    anchors = src / "lawbench_dummy" / "anchors" / "dummy.toml"
    text = anchors.read_text(encoding="utf-8")
    assert old in text
    anchors.write_text(text.replace(old, new, 1), encoding="utf-8")
    return pip_install_into(src, tmp_path / "site", tmp_path)


def test_a_case_typo_in_a_third_party_law_is_caught_by_check(cli_env, broken_site, tmp_path):
    site = _dummy_with(tmp_path, "case = { terms = [2, 2] }", "case = { termz = [2, 2] }")
    env = dict(cli_env, PYTHONPATH=os.pathsep.join([str(site), str(broken_site)]))
    p = run_cli(["check"], env, tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    line = next(l for l in p.stderr.splitlines() if "error" in l and "dummy.toml" in l)
    assert str(site / "lawbench_dummy" / "anchors" / "dummy.toml") in line
    assert "anchor dummy.sum-pass" in line and "field case.termz" in line and "unknown field" in line


def test_forgotten_package_data_is_reported_not_silent(cli_env, tmp_path):
    site = write_plugin(tmp_path / "site", "lawbench-nodata", {"nodata": "lawbench_nodata"}, {
        "lawbench_nodata/__init__.py": (
            "import lawbench\n\n\nclass NoData(lawbench.Law):\n    name = 'nodata'\n"
            "    anchors_package = 'lawbench_nodata.anchors'\n\n\n@lawbench.hookimpl\n"
            "def lawbench_laws():\n    yield NoData\n"),
        "lawbench_nodata/anchors/__init__.py": "",
    })
    p = run_cli(["check"], dict(cli_env, PYTHONPATH=str(site)), tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "distribution lawbench-nodata 0.1.0" in p.stderr and "holds no *.toml anchor files" in p.stderr


def test_a_typo_in_anchors_package_names_the_distribution(cli_env, tmp_path):
    site = write_plugin(tmp_path / "site", "lawbench-typo", {"typo": "lawbench_typo"}, {
        "lawbench_typo/__init__.py": (
            "import lawbench\n\n\nclass Typo(lawbench.Law):\n    name = 'typo'\n"
            "    anchors_package = 'lawbench_typo.anchorz'\n\n\n@lawbench.hookimpl\n"
            "def lawbench_laws():\n    yield Typo\n"),
    })
    env = dict(cli_env, PYTHONPATH=str(site))
    p = run_cli(["check"], env, tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "distribution lawbench-typo 0.1.0" in p.stderr and "'lawbench_typo.anchorz'" in p.stderr
    laws = run_cli(["laws"], env, tmp_path)  # the others are still listed
    assert laws.returncode == 0 and "law4" in laws.stdout and "Traceback" not in laws.stderr


def test_a_plugin_brings_a_command_a_profile_and_catalogue_models(cli_env, tmp_path):
    """Everything Law 4 brings through hooks, a third party can bring the same way."""
    profile = (HERE.parent / "hardware_profiles" / "cpu-ddr4.toml").read_text(encoding="utf-8")
    profile = profile.replace('id = "cpu-ddr4"', 'id = "my-box"', 1)
    site = write_plugin(tmp_path / "site", "lawbench-extras", {"extras": "lawbench_extras.plugin"}, {
        "lawbench_extras/__init__.py": "",
        "lawbench_extras/profiles/my-box.toml": profile,
        "lawbench_extras/plugin.py": (
            "from importlib.resources import files\n\nimport lawbench\n\n\n"
            "def _args(p):\n    p.add_argument('--name', default='world')\n\n\n"
            "def _hello(args):\n    print(f'hello {args.name}')\n    return 0\n\n\n"
            "@lawbench.hookimpl\ndef lawbench_commands():\n"
            "    yield lawbench.Command('hello', 'say hello', _args, _hello)\n\n\n"
            "@lawbench.hookimpl\ndef lawbench_profile_dirs():\n"
            "    yield files('lawbench_extras') / 'profiles'\n"),
    })
    assert 'id = "my-box"' in profile
    env = dict(cli_env, PYTHONPATH=str(site))
    hello = run_cli(["hello", "--name", "lawbench"], env, tmp_path)
    assert hello.returncode == 0 and hello.stdout.strip() == "hello lawbench", hello.stderr
    header = tmp_path / "tiny.gguf"
    _tiny_gguf(header)
    pred = run_cli(["predict", str(header), "--profile", "my-box", "--json"], env, tmp_path)
    assert pred.returncode == 0, pred.stderr
    assert json.loads(pred.stdout)["profile"] == "my-box"


def test_a_plugin_command_may_not_take_a_core_name(cli_env, tmp_path):
    site = write_plugin(tmp_path / "site", "lawbench-greedy", {"greedy": "lawbench_greedy"}, {
        "lawbench_greedy/__init__.py": (
            "import lawbench\n\n\n@lawbench.hookimpl\ndef lawbench_commands():\n"
            "    yield lawbench.Command('check', 'mine now', lambda p: None, lambda a: 0)\n"),
    })
    p = run_cli(["check"], dict(cli_env, PYTHONPATH=str(site)), tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "distribution lawbench-greedy 0.1.0" in p.stderr and "command 'check' is one of lawbench's own" in p.stderr


def _tiny_gguf(path: Path) -> None:
    """A real two-layer llama GGUF header with f16 tensors (gguf's own writer)."""
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    rng = np.random.default_rng(0)
    w.add_tensor("token_embd.weight", rng.standard_normal((256, 64)).astype(np.float16))
    for i in range(2):
        for name, shape in (("attn_q", (64, 64)), ("attn_k", (64, 64)), ("attn_v", (64, 64)),
                            ("attn_output", (64, 64)), ("ffn_up", (128, 64)), ("ffn_gate", (128, 64)),
                            ("ffn_down", (64, 128))):
            w.add_tensor(f"blk.{i}.{name}.weight", rng.standard_normal(shape).astype(np.float16))
    w.add_tensor("output.weight", rng.standard_normal((256, 64)).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_a_law_that_predicts_nan_gets_an_error_that_says_so():
    from lawbench.testing import evaluate_anchor, make_anchor

    class NaNLaw(lawbench.Law):
        name = "test"

        def predict(self, anchor, profile, resources=None):
            return lawbench.Prediction(float("nan"))

    result = evaluate_anchor(make_anchor(), NaNLaw())
    assert result.verdict.value == "ERROR"
    assert "law 'test' predicted nan, not a finite number" in result.reason


def test_a_data_error_found_while_running_names_the_anchor_file():
    from lawbench.core.run.evaluate import RunPolicy, evaluate
    from lawbench.testing import make_anchor, make_profile

    class Picky(lawbench.Law):
        name = "test"

        def predict(self, anchor, profile, resources=None):
            raise lawbench.DataError(lawbench.ANCHOR_FILE, "no such table", anchor=anchor.id, field="case.x")

    profile = make_profile()
    policy = RunPolicy(profile=profile, profiles={profile.id: profile}, on_own_runner=True)
    result = evaluate(make_anchor(), Picky(), policy, file="/data/mine.toml")
    assert result.verdict.value == "ERROR"
    assert result.reason == "/data/mine.toml: anchor test.anchor: field case.x: no such table"


def test_a_law_bug_is_an_error_naming_the_law_not_a_bare_exception():
    from lawbench.testing import evaluate_anchor, make_anchor

    class Buggy(lawbench.Law):
        name = "test"

        def predict(self, anchor, profile, resources=None):
            return lawbench.Prediction(anchor.case["model_gb"])

    result = evaluate_anchor(make_anchor(), Buggy())
    assert result.verdict.value == "ERROR"
    assert result.reason.startswith("KeyError in law 'test': KeyError('model_gb')")
    assert "case_model" in result.reason


def _toy(site: Path, dist: str, ep_name: str, module: str, body: str) -> Path:
    return write_plugin(site, dist, {ep_name: module}, {f"{module}.py": "import lawbench\n\n\n" + body})


def _law_body(name: str) -> str:
    return (f"class L(lawbench.Law):\n    name = {name!r}\n\n\n"
            "@lawbench.hookimpl\ndef lawbench_laws():\n    yield L\n")


def test_two_distributions_may_both_name_their_entry_point_plugin(cli_env, tmp_path):
    site = tmp_path / "site"
    _toy(site, "lawbench-alpha", "plugin", "lawbench_alpha", _law_body("alpha"))
    _toy(site, "lawbench-beta", "plugin", "lawbench_beta", _law_body("beta"))
    p = run_cli(["laws"], dict(cli_env, PYTHONPATH=str(site)), tmp_path)
    assert p.returncode == 0 and "broken" not in p.stderr, p.stderr
    names = {line.split()[0] for line in p.stdout.splitlines()}
    assert {"alpha", "beta", "law4", "minfer"} <= names


def test_a_plugin_taking_a_builtin_law_name_is_the_one_set_aside(cli_env, tmp_path):
    site = _toy(tmp_path / "site", "lawbench-usurper", "aaa", "lawbench_usurper", _law_body("law4"))
    env = dict(cli_env, PYTHONPATH=str(site))
    p = run_cli(["profiles"], env, tmp_path)
    assert p.returncode == 0, p.stderr
    assert "distribution lawbench-usurper 0.1.0" in p.stderr and "law name 'law4' is already registered" in p.stderr
    laws = run_cli(["laws"], env, tmp_path)
    assert "plugin lawbench.plugins.law4" in next(l for l in laws.stdout.splitlines() if l.startswith("law4"))


@pytest.mark.parametrize("body, words", [
    ("import sys\nsys.exit(3)\n", "could not load: SystemExit: 3"),
    ("class Boom(BaseException):\n    pass\n\n\nraise Boom('at import')\n", "could not load: Boom: at import"),
    ("class L(lawbench.Law):\n    name = 4\n\n\n@lawbench.hookimpl\ndef lawbench_laws():\n    yield L\n",
     "invalid name 4"),
    ("@lawbench.hookimpl\ndef lawbench_profile_dirs():\n    yield 42\n", "lawbench_profile_dirs() yielded 42"),
    ("class L(lawbench.Law):\n    name = 'l'\n    anchors_package = 42\n\n\n@lawbench.hookimpl\n"
     "def lawbench_laws():\n    yield L\n", "anchors_package must be a package name, not 42"),
    ("def _bad(p):\n    raise RuntimeError('bad args')\n\n\n@lawbench.hookimpl\ndef lawbench_commands():\n"
     "    yield lawbench.Command('hello', 'h', _bad, lambda a: 0)\n", "add_arguments raised RuntimeError: bad args"),
])
def test_a_plugin_that_breaks_in_any_way_is_named_and_the_rest_works(cli_env, tmp_path, body, words):
    site = _toy(tmp_path / "site", "lawbench-bad", "bad", "lawbench_bad", body)
    env = dict(cli_env, PYTHONPATH=str(site))
    for args, rc in ((["profiles"], 0), (["laws"], 0), (["check"], 2)):
        p = run_cli(args, env, tmp_path)
        assert p.returncode == rc and "Traceback" not in p.stderr, (args, p.stderr)
        warning = next(line for line in p.stderr.splitlines() if "broken plugin" in line)
        assert "distribution lawbench-bad 0.1.0" in warning and words in warning, warning


@pytest.mark.parametrize("run_body, rc, words", [
    ("    raise ValueError('oops')\n", 1, "command 'hello' of distribution lawbench-cmd 0.1.0"),
    ("    print('hi')\n", 0, ""),  # returning None is success
])
def test_a_plugin_command_that_fails_is_one_line(cli_env, tmp_path, run_body, rc, words):
    body = ("def _run(args):\n" + run_body + "\n\n@lawbench.hookimpl\ndef lawbench_commands():\n"
            "    yield lawbench.Command('hello', 'h', lambda p: None, _run)\n")
    site = _toy(tmp_path / "site", "lawbench-cmd", "cmd", "lawbench_cmd", body)
    p = run_cli(["hello"], dict(cli_env, PYTHONPATH=str(site)), tmp_path)
    assert p.returncode == rc and "Traceback" not in p.stderr, p.stderr
    assert words in p.stderr


def test_a_missing_plugin_profile_folder_is_set_aside_outside_check(cli_env, tmp_path):
    body = "@lawbench.hookimpl\ndef lawbench_profile_dirs():\n    yield '/nonexistent/profiles'\n"
    site = _toy(tmp_path / "site", "lawbench-prof", "prof", "lawbench_prof", body)
    env = dict(cli_env, PYTHONPATH=str(site))
    pred = run_cli(["predict", "manifest:qwen3-30b-a3b", "--profile", "gtx1060", "--json"], env, tmp_path)
    assert pred.returncode == 0, pred.stderr
    assert "distribution lawbench-prof 0.1.0" in pred.stderr and "/nonexistent/profiles" in pred.stderr
    listing = run_cli(["profiles"], env, tmp_path)
    assert listing.returncode == 0 and "gtx1060" in listing.stdout, listing.stderr
    assert "distribution lawbench-prof 0.1.0" in listing.stderr
    check = run_cli(["check"], env, tmp_path)
    assert check.returncode == 2 and "/nonexistent/profiles" in check.stderr and "Traceback" not in check.stderr


def test_a_failing_exporter_is_named_and_changes_no_verdict(cli_env, tmp_path):
    body = "@lawbench.hookimpl\ndef lawbench_run_finished(record):\n    raise RuntimeError('exporter down')\n"
    site = _toy(tmp_path / "site", "lawbench-export", "export", "lawbench_export", body)
    env = dict(cli_env, PYTHONPATH=os.pathsep.join([str(site), cli_env["PYTHONPATH"]]))
    out = tmp_path / "out"
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", str(out), "--no-history"], env, tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr  # dummy.sum-fail, as without the exporter
    assert "lawbench_run_finished of distribution lawbench-export 0.1.0" in p.stderr
    assert "RuntimeError: exporter down" in p.stderr
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["exit_code"] == 1
