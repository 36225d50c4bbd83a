"""`nox -s tests` runs the suite in two passes (noxfile.py): the rest on every core, then the tests
that need the box to themselves one at a time. tests/conftest.py decides which is which; these
tests keep that decision true as modules are added."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import ENGINE_FIXTURES, SERIAL_MODULES

HERE = Path(__file__).parent
# A runner-like environment: lawbench on the machine's own cache, which has one box lock.
STRIPS_LAWBENCH_ENV = re.compile(r"""startswith\(\(?["']LAWBENCH_""")
# A stop signal to the pytest process itself, which in a pytest-xdist worker is the worker.
SIGNALS_ITSELF = re.compile(r"os\.kill\(os\.getpid\(\)|signal\.raise_signal\(|os\.killpg\(0")


def test_every_module_that_needs_the_box_to_itself_is_serial():
    # a shared helper (tests/_nights.py) that runs lawbench as a runner does makes its importers so
    helpers = {p.stem for p in HERE.glob("_*.py") if STRIPS_LAWBENCH_ENV.search(p.read_text(encoding="utf-8"))}
    assert "_nights" in helpers, "the pattern no longer finds the helper it was written for"
    imports = re.compile(rf"^\s*(?:from|import)\s+({'|'.join(sorted(helpers))})\b", re.M)
    needs = {p.name for p in HERE.glob("test_*.py")
             if STRIPS_LAWBENCH_ENV.search(p.read_text(encoding="utf-8")) or SIGNALS_ITSELF.search(p.read_text(encoding="utf-8"))
             or imports.search(p.read_text(encoding="utf-8"))}
    assert needs, "the patterns no longer find the modules they were written for"
    assert needs <= SERIAL_MODULES, f"run these in the serial pass (tests/conftest.py): {sorted(needs - SERIAL_MODULES)}"
    assert {m for m in SERIAL_MODULES if not (HERE / m).is_file()} == set(), "a listed module is gone"


def test_the_parallel_pass_holds_no_engine_test_and_the_serial_pass_holds_them_all():
    def collected(marker: str) -> list[str]:
        p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                            "-m", marker, str(HERE)], capture_output=True, text=True, cwd=HERE.parent, timeout=300, encoding="utf-8")
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        return [line for line in p.stdout.splitlines() if "::" in line]

    parallel_ids, serial_ids = collected("not serial and not nightly"), collected("serial and not nightly")
    parallel, serial = ({i.split("::")[0] for i in ids} for ids in (parallel_ids, serial_ids))
    # Modules whose every test takes the real build (ENGINE_FIXTURES) or is marked integration.
    assert "tests/test_cpu_planted_faults.py" in serial and "tests/test_cpu_planted_faults.py" not in parallel
    assert "tests/test_nightly_gate.py" in serial and "tests/test_nightly_gate.py" not in parallel
    assert not {f"tests/{m}" for m in SERIAL_MODULES} & parallel
    assert ENGINE_FIXTURES == {"llama"}  # the one fixture that hands out the real build
    assert len(parallel_ids) > 3 * len(serial_ids)  # most of the suite runs on every core
