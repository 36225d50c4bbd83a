"""Bad input to the nightly service's commands, found by a new-user probe: each is one line and the
right exit code, and nothing bad reaches the append-only history or a runner's build cache."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lawbench.core.engines import cuda
from lawbench.core.errors import LawbenchError

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def lawbench(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    env = env or {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_"))}
    done = subprocess.run([str(BIN / "lawbench"), *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300, encoding="utf-8")
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> dict:
    """A real run record (prediction anchors only: seconds) with its contribution bundle."""
    out = tmp_path_factory.mktemp("run")
    done = lawbench("run", "--profile", "cpu", "-k", "prediction", "--out", str(out / "r"), "--no-history",
                    "--contribute", str(out / "bundle.json"), cwd=out)
    assert done.returncode in (0, 1), done.stderr
    data = json.loads((out / "r" / "run.json").read_text(encoding="utf-8"))
    data["_bundle"] = str(out / "bundle.json")
    return data


def _write(folder: Path, name: str, record: dict, **changes) -> Path:
    data = {k: v for k, v in record.items() if not k.startswith("_")}
    data.update(changes)
    path = folder / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("changes, says", [
    ({"run_id": "../../etc/x"}, "field run_id"),
    ({"run_id": ""}, "field run_id"),
    ({"profile": "../cpu"}, "field profile"),
    ({"finished": "garbage"}, "'garbage' is not a time in the record's one form"),
    ({"started": "2026-12-01 02:00"}, "'2026-12-01 02:00' is not a time in the record's one form"),
    ({"started": "2026-W48-3T02:00:00+00:00"}, "is not a time in the record's one form"),
    ({"finished": "2020-01-01T00:00:00+00:00"}, "is before started"),
    ({"finished": "2099-01-01T00:00:00+00:00"}, "in the future of this clock"),
])
def test_records_that_would_break_the_history_for_ever_are_refused(record, tmp_path, changes, says):
    bad = _write(tmp_path, "bad.json", record, **changes)
    done = lawbench("history", "import", "--db", str(tmp_path / "h.sqlite"), str(bad), cwd=tmp_path)
    assert done.returncode == 2 and says in done.stderr and str(bad.name) in done.stderr, done.stderr
    listed = lawbench("history", "--db", str(tmp_path / "h.sqlite"), "--json", cwd=tmp_path)
    assert json.loads(listed.stdout) == []  # nothing went in


def test_a_record_with_sorted_keys_is_the_same_run(record, tmp_path):
    db = str(tmp_path / "h.sqlite")
    plain = _write(tmp_path, "plain.json", record)
    assert lawbench("history", "import", "--db", db, str(plain), cwd=tmp_path).returncode == 0
    (tmp_path / "sorted.json").write_text(json.dumps(json.loads(plain.read_text(encoding="utf-8")), indent=7, sort_keys=True), encoding="utf-8")
    again = lawbench("history", "import", "--db", db, str(tmp_path / "sorted.json"), cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.startswith("already"), again.stdout + again.stderr


def test_empty_paths_and_windows_are_refused(record, tmp_path):
    db = str(tmp_path / "h.sqlite")
    (tmp_path / "stray.json").write_text("{}", encoding="utf-8")  # an empty PATH must not sweep the current folder
    done = lawbench("history", "import", "--db", db, "", cwd=tmp_path)
    assert done.returncode == 2 and "an empty PATH" in done.stderr
    for hours in ("nan", "0", "-3", "inf"):
        done = lawbench("history", "stale", "--db", db, "--hours", hours, cwd=tmp_path)
        assert done.returncode == 2 and "--hours" in done.stderr
    done = lawbench("history", "stale", "--db", db, "--profile", "h2OO", cwd=tmp_path)
    assert done.returncode == 2 and "unknown hardware profile 'h2OO'" in done.stderr
    done = lawbench("run", "--profile", "cpu", "-k", "prediction", "--contribute", "", cwd=tmp_path)
    assert done.returncode == 2 and "--contribute needs a file path" in done.stderr


def test_the_report_reads_a_contribution_bundle(record, tmp_path):
    done = lawbench("report", record["_bundle"], "--out", str(tmp_path / "b.html"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert record["run_id"] in (tmp_path / "b.html").read_text(encoding="utf-8")


def test_runner_matrix_refuses_an_empty_selection_and_shared_labels(tmp_path):
    done = lawbench("profiles", "runners", "--only", ",", cwd=tmp_path)
    assert done.returncode == 2 and "names no profile" in done.stderr
    both = lawbench("profiles", "runners", "--only", "gtx1060", "--only", "cpu", cwd=tmp_path)
    assert [j["profile"] for j in json.loads(both.stdout)["include"]] == ["cpu", "gtx1060"]
    absent = lawbench("profiles", "runners", "--only", "h200", cwd=tmp_path)
    assert absent.returncode == 2 and "profile 'h200' is not deployed" in absent.stderr
    extra = tmp_path / "profiles"
    extra.mkdir()
    (extra / "twin.toml").write_text((ROOT / "hardware_profiles" / "cpu.toml").read_text(encoding="utf-8")
                                     .replace('id = "cpu"', 'id = "twin"').replace("generic = true", 'cpu_model_contains = "x"'), encoding="utf-8")
    done = lawbench("profiles", "--profile-dir", str(extra), "runners", cwd=tmp_path)
    assert done.returncode == 2 and "carry the same runner labels" in done.stderr, done.stdout + done.stderr


def test_the_first_night_collects_nothing_and_still_builds_the_report(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_"))}
    env["PATH"] = f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}"
    (tmp_path / "tonight").mkdir()
    done = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_collect.sh"), str(tmp_path / "data"),
                           str(tmp_path / "tonight"), str(tmp_path / "site")], capture_output=True, text=True,
                          env=env, timeout=300, encoding="utf-8")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no runner job left a record tonight" in done.stdout
    assert (tmp_path / "site" / "index.html").is_file()
    missing = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_collect.sh"), str(tmp_path / "data"),
                              str(tmp_path / "nope"), str(tmp_path / "site")], capture_output=True, text=True,
                             env=env, timeout=300, encoding="utf-8")
    # download-artifact makes no folder on a night with no artifacts: that night is reported, not an error
    assert missing.returncode == 0 and "no folder" in missing.stdout, missing.stdout + missing.stderr


def test_ab_refuses_options_that_pick_the_model(tmp_path):
    for option in ("-hf foo/bar", "--hf-repo foo/bar", "-hff x.gguf", "-mu http://x/y.gguf"):
        done = lawbench("ab", "--profile", "cpu", "--b", f"llama.cpp+args={option}", "-k", "syn-25m-q4_0",
                        cwd=tmp_path)
        assert done.returncode == 2 and "the anchor decides the model" in done.stderr, (option, done.stderr)


def test_a_cuda_compiler_that_does_not_run_or_a_bad_arch_is_refused_before_cmake(tmp_path):
    with pytest.raises(LawbenchError, match="does not run"):
        cuda.check_toolkit(str(tmp_path / "no-nvcc"), "90")
    with pytest.raises(LawbenchError, match="'abc' is not a CUDA architecture"):
        cuda.check_toolkit(str(tmp_path / "no-nvcc"), "abc")


def test_history_refs_limits_and_compare_json(record, tmp_path):
    db = str(tmp_path / "h.sqlite")
    first = _write(tmp_path, "a.json", record, run_id="night-a", started="2026-11-01T02:00:00+00:00",
                   finished="2026-11-01T02:05:00+00:00")
    second = _write(tmp_path, "b.json", record, run_id="night-b", started="2026-11-02T02:00:00+00:00",
                    finished="2026-11-02T02:05:00+00:00")
    assert lawbench("history", "import", "--db", db, str(first), str(second), cwd=tmp_path).returncode == 0
    done = lawbench("history", "--db", db, "compare", "latest~", "latest", "--json", cwd=tmp_path)
    data = json.loads(done.stdout)  # one object, as docs/history.md says
    assert (data["run_a"], data["run_b"], data["comparable"]) == ("night-a", "night-b", True)
    for limit in ("0", "-3"):
        done = lawbench("history", "--db", db, "--limit", limit, cwd=tmp_path)
        assert done.returncode == 2 and "--limit" in done.stderr
