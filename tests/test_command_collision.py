"""Issue 33: core's command names are discovered from its command modules (no hand-kept list); a
plugin's command that takes one, or another plugin's, is set aside and named on stderr, and every
other command — `lawbench --help` included — keeps working. Real plugin distributions on sys.path
(a .dist-info with its entry point, as pip leaves it), the real console entry."""
from conftest import run_cli, write_plugin

GREEDY = ("import lawbench\n\n\n"
          "def _hello(args):\n    print('hello from greedy')\n    return 0\n\n\n"
          "@lawbench.hookimpl\ndef lawbench_commands():\n"
          "    yield lawbench.Command('plan', 'mine now', lambda p: None, lambda a: 0)\n"  # missing from the old list
          "    yield lawbench.Command('census plant', 'mine too', lambda p: None, lambda a: 0)\n"
          "    yield lawbench.Command('hello', 'say hello', lambda p: None, _hello)\n"
          "    yield lawbench.Command('greet', 'greet', lambda p: None, _hello)\n")
ECHO = ("import lawbench\n\n\n@lawbench.hookimpl\ndef lawbench_commands():\n"
        "    yield lawbench.Command('hello', 'a second hello', lambda p: None, lambda a: print('echo') or 0)\n")


def _site(tmp_path):
    site = tmp_path / "site"
    write_plugin(site, "lawbench-greedy", {"greedy": "lawbench_greedy"}, {"lawbench_greedy/__init__.py": GREEDY})
    write_plugin(site, "lawbench-echo", {"echo": "lawbench_echo"}, {"lawbench_echo/__init__.py": ECHO})
    return site


def test_help_works_and_names_every_colliding_command(cli_env, tmp_path):
    env = dict(cli_env, PYTHONPATH=str(_site(tmp_path)))
    p = run_cli(["--help"], env, tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "hello" in p.stdout and "plan" in p.stdout
    assert "distribution lawbench-greedy 0.1.0" in p.stderr
    assert "command 'plan' is one of lawbench's own" in p.stderr
    assert "command 'census plant' is one of lawbench's own" in p.stderr
    assert "command 'hello' is already added by distribution lawbench-echo" in p.stderr


def test_core_s_command_and_the_plugin_s_other_command_both_run(cli_env, tmp_path):
    env = dict(cli_env, PYTHONPATH=str(_site(tmp_path)))
    plan = run_cli(["plan", "--help"], env, tmp_path)  # core's plan, not the plugin's
    assert plan.returncode == 0 and "Traceback" not in plan.stderr and "mine now" not in plan.stdout
    hello = run_cli(["hello"], env, tmp_path)
    assert hello.returncode == 0 and hello.stdout.strip() == "echo", hello.stderr  # echo loads first (by name)
    greet = run_cli(["greet"], env, tmp_path)  # greedy's other commands keep working
    assert greet.returncode == 0 and greet.stdout.strip() == "hello from greedy", greet.stderr


def test_without_the_plugins_nothing_is_named(cli_env, tmp_path):
    p = run_cli(["--help"], cli_env, tmp_path)
    assert p.returncode == 0 and "one of lawbench's own" not in p.stderr
