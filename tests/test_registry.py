import inspect
import re
import types
from pathlib import Path

import pytest

from lawbench.core.laws import hookspecs
from lawbench.core.laws.hookspecs import hookimpl
from lawbench.core.laws.law import Law
from lawbench.core.errors import PluginError
from lawbench.core.laws.registry import BUILTIN_PLUGINS, build_registry, make_plugin_manager
from lawbench.testing import registered

HOOKS = sorted(n for n, f in inspect.getmembers(hookspecs, inspect.isfunction) if n.startswith("lawbench_"))


def plugin(name, **hooks):
    mod = types.ModuleType(name)
    for k, v in hooks.items():
        setattr(mod, k, hookimpl(v))
    return mod


class A(Law):
    name = "alpha"
    title = "Alpha"


def test_builtins_register_law4():
    reg = build_registry(make_plugin_manager(autoload=False))
    assert "law4" in reg.laws
    assert reg.law_origin["law4"] == "plugin lawbench.plugins.law4"
    assert list(reg.laws) == sorted(reg.laws)


def test_lawbench_laws_accepts_classes_and_instances(lawbench_plugin):
    class B(Law):
        name = "beta"
    with lawbench_plugin(plugin("p1", lawbench_laws=lambda: [A, B()])) as reg:
        assert {"alpha", "beta"} <= set(reg.laws)


def test_duplicate_law_name_is_rejected_naming_both():
    class A2(Law):
        name = "alpha"
    pm = make_plugin_manager(autoload=False)
    pm.register(plugin("first", lawbench_laws=lambda: [A]), name="first")
    pm.register(plugin("second", lawbench_laws=lambda: [A2]), name="second")
    reg = build_registry(pm)
    assert type(reg.laws["alpha"]) is A  # the first keeps it; the second is set aside, named
    (problem,) = reg.broken
    assert "alpha" in problem and "plugin first" in problem and "plugin second" in problem


@pytest.mark.parametrize("bad, needle", [
    (lambda: [object()], "not a Law"),
    (lambda: [type("C", (Law,), {"name": "Bad Name"})], "invalid name"),
    (lambda: [type("D", (Law,), {"name": ""})], "invalid name"),
    (lambda: 1 / 0, "ZeroDivisionError"),
])
def test_malformed_registrations_name_the_plugin_and_are_set_aside(bad, needle):
    pm = make_plugin_manager(autoload=False)
    pm.register(plugin("broken", lawbench_laws=bad), name="broken")
    pm.register(plugin("good", lawbench_laws=lambda: [A]), name="good")
    reg = build_registry(pm)
    (problem,) = reg.broken
    assert needle in problem and "plugin broken" in problem
    assert "alpha" in reg.laws and "law4" in reg.laws  # the rest keeps working


def test_lawbench_testing_raises_on_a_broken_plugin_so_authors_see_it(lawbench_plugin):
    with pytest.raises(PluginError, match="ZeroDivisionError"):
        with lawbench_plugin(plugin("mine", lawbench_laws=lambda: 1 / 0)):
            pass


def test_a_misspelt_hook_sets_the_plugin_aside():
    from lawbench.core.laws.registry import load_plugins

    typo = plugin("typo", lawbench_lawz=lambda: [A])
    loaded = load_plugins(autoload=False, extra=(typo,))
    (problem,) = loaded.broken
    assert "lawbench_lawz" in problem and "typo" in problem
    assert not loaded.pm.is_registered(typo)
    assert "law4" in build_registry(loaded.pm, loaded.origins, loaded.broken).laws


def test_lawbench_profile_dirs_extends_profiles(tmp_path, lawbench_plugin):
    from lawbench.core.hardware.profiles import load_profiles

    src = Path(__file__).parent.parent / "hardware_profiles" / "cpu.toml"
    text = src.read_text(encoding="utf-8").replace('id = "cpu"', 'id = "my-box"', 1)
    (tmp_path / "my-box.toml").write_text(text, encoding="utf-8")
    with lawbench_plugin(plugin("prof", lawbench_profile_dirs=lambda: [tmp_path])) as reg:
        assert reg.profile_dirs == [tmp_path]
        profiles = load_profiles(extra_dirs=reg.profile_dirs)
        assert "my-box" in profiles and "cpu" in profiles


def test_lawbench_run_finished_is_called_with_the_record(lawbench_plugin):
    seen = []
    with lawbench_plugin(plugin("exp", lawbench_run_finished=lambda record: seen.append(record))) as reg:
        reg.pm.hook.lawbench_run_finished(record="R", outputs=None)
    assert seen == ["R"]


def test_disable_autoload_env(monkeypatch):
    from lawbench.core.laws import registry

    calls = []
    monkeypatch.setenv("LAWBENCH_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setattr(registry, "_entry_points", lambda: calls.append("lawbench") or [])
    make_plugin_manager()
    assert calls == []
    monkeypatch.setenv("LAWBENCH_DISABLE_PLUGIN_AUTOLOAD", "0")
    make_plugin_manager()
    assert calls == ["lawbench"]


def test_every_hook_is_tested_and_documented():
    """datasette's meta-test: a hook without a test or a docstring is a hole in the surface."""
    here = Path(__file__).parent
    text = "\n".join(p.read_text(encoding="utf-8") for p in here.glob("test_*.py") if p.name != "test_registry.py")
    text += Path(__file__).read_text(encoding="utf-8").split("def test_every_hook")[0]
    for name in HOOKS:
        assert re.search(rf"\b{name}\b", text), f"hook {name} has no test"
        doc = getattr(hookspecs, name).__doc__ or ""
        assert ":return:" in doc or ":param" in doc, f"hook {name} is not documented"


def test_builtin_plugin_modules_only_register():
    """Plugin __init__ modules register and delegate; the law lives in its own module."""
    root = Path(__file__).parent.parent
    for mod in BUILTIN_PLUGINS:
        init = root / mod.replace("lawbench.", "").replace(".", "/") / "__init__.py"
        body = init.read_text(encoding="utf-8")
        assert "class " not in body, f"{init} defines a class; move the law into its own module"
        assert len(body.splitlines()) < 30


def test_packages_listed_in_pyproject():
    """Every folder with an __init__.py is mapped under `lawbench` (or it would not install)."""
    import sys
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    root = Path(__file__).parent.parent
    cfg = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    mapped = {v.rstrip("/") for v in cfg["package-dir"].values()}
    for init in root.glob("**/__init__.py"):
        rel = init.parent.relative_to(root).as_posix()
        # A developer's own virtualenv or nox folder inside the checkout is not the package.
        parts = init.parent.relative_to(root).parts
        if parts[0] in ("tests", "examples", "build") or any(p.startswith(".") for p in parts):
            continue
        assert rel in mapped, f"{rel}/ has an __init__.py but is not in [tool.setuptools.package-dir]"
    assert set(cfg["package-dir"]) == set(cfg["packages"])


def test_hooks_list_is_not_empty():
    assert HOOKS == ["lawbench_commands", "lawbench_laws", "lawbench_model_catalogs", "lawbench_profile_dirs",
                     "lawbench_run_finished"]


def test_registered_context_unregisters(lawbench_plugin):
    mod = plugin("temp", lawbench_laws=lambda: [A])
    with registered(mod) as reg:
        assert reg.pm.is_registered(mod)
    assert not reg.pm.is_registered(mod)
