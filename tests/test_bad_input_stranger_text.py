"""Issue 32 item 4: every view of a stranger's text goes through one escaping and length rule
(lawbench.core.untrusted_text): a record holding terminal escape sequences, a Markdown image, a
link, raw HTML and a 100 KB engine version is shown literally and cut in the terminal, in the
Markdown of `baseline show` and the step summary, in the HTML report and in its plots — and
`report --history` over it finishes (it stalled past a minute)."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from conftest import run_cli

from lawbench.core.models.gate import GateNews, GateVerdict
from lawbench.core.record.gate_view import gate_markdown, gate_text
from lawbench.core.record.reports import RunRecord
from lawbench.core.record.summaries import markdown_summary
from lawbench.core.untrusted_text import FIELD, cut, markdown, markdown_code, plot_label, terminal

ROOT = Path(__file__).resolve().parents[1]
NIGHT4 = ROOT / "results" / "cpu-nights" / "night4.run.json"
ESC = "\x1b]0;owned\x07\x1b[2J\x1b[31m"
IMAGE = "![t](https://evil.example/p.png)"
LINK = "[click](javascript:alert(1))"
HTML = "<img src=x onerror=alert(1)>"
HOSTILE = f"{ESC}{IMAGE} {LINK} {HTML} $\\frac{{1}}{{0}}$ a|b"
ENGINE = "11434.0.0" + "x" * 100_000  # 100 KB


def _hostile(run_id: str = "hostile-text-1") -> dict:
    d = json.loads(NIGHT4.read_text(encoding="utf-8"))
    d["run_id"] = run_id
    del d["engine"]["build_number"]  # so the engine's key is its version (core.record.run_keys)
    d["engine"]["version"] = ENGINE
    d["lawbench_version"] = HOSTILE
    fail = next(r for r in d["results"] if r["verdict"] == "FAIL")
    fail["reason"] = HOSTILE
    d["gate"] = {"verdict": "red", "profile": d["profile"], "fingerprint": HOSTILE, "engine": ENGINE,
                 "alpha": 0.001, "baseline_runs": 1, "baseline_run_id": "b" * 32, "new_baseline": HOSTILE,
                 "news": [{"anchor_id": fail["anchor_id"], "kind": "turned", "before": HOSTILE, "after": "FAIL",
                           "why": HOSTILE}]}
    return d


def _no_active_markdown(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text
    text = re.sub(r"(?<!\\)(`+)(.+?)(?<!`)\1(?!`)", "", text)  # inside a code span nothing is Markdown
    assert not re.search(r"!\[[^\]]*(?<!\\)\]\(", text), "an image"
    assert not re.search(r"(?<!\\)\]\(", text), "a link"
    assert "<img" not in text and "https://" not in text


def _short(text: str) -> None:
    assert len(max(text.splitlines(), key=len)) < 20_000, "a 100 KB field was printed whole"


def test_the_rule_itself():
    assert terminal("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert cut("x" * 500) == "x" * FIELD + f"… ({500 - FIELD} more characters)"
    _no_active_markdown(markdown(HOSTILE))
    assert markdown("48.03 [47.5, 48.6]") == "48.03 [47.5, 48.6]"  # a bracket that opens nothing stays
    assert "|" not in markdown_code("a|b").replace("\\|", "")
    assert markdown_code("x`y") == "``x`y``"
    assert "$" not in plot_label("$x$").replace("\\$", "")


def test_baseline_show_prints_a_stranger_s_gate_literally(tmp_path, cli_env):
    f = tmp_path / "hostile.json"
    f.write_text(json.dumps(_hostile()), encoding="utf-8")
    p = run_cli(["baseline", "show", str(f)], cli_env, tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    _no_active_markdown(p.stdout)
    _short(p.stdout)
    assert "click" in p.stdout and "more characters" in p.stdout  # shown, escaped and cut: not dropped


def test_the_step_summary_and_the_terminal_gate_view_are_escaped_and_cut():
    record = RunRecord.model_validate(_hostile())
    md = markdown_summary(record)
    _no_active_markdown(md)
    _short(md)
    assert md.count("\n| ") >= len([r for r in record.results if "status" not in r.detail])  # rows intact
    lines = gate_text(record)
    assert lines and not any("\x1b" in line or "\x07" in line for line in lines)
    _short("\n".join(lines))
    assert "\\x1b" in gate_markdown(record)  # written out, not swallowed


def test_a_gate_news_with_a_huge_field_is_cut_in_every_view():
    g = GateVerdict(verdict="red", profile="cpu", fingerprint="f", engine="e", alpha=0.001,
                    news=[GateNews(anchor_id="a.b", kind="turned", why="w" * 100_000)])
    record = RunRecord(profile="cpu", gate=g)
    _short(gate_markdown(record))
    _short("\n".join(gate_text(record)))


@pytest.mark.parametrize("view", ["run", "history"])
def test_the_html_report_of_a_stranger_s_record_is_escaped_cut_and_prompt(view, tmp_path, cli_env):
    f = tmp_path / "hostile-text-1.json"
    f.write_text(json.dumps(_hostile()), encoding="utf-8")
    out = tmp_path / "page.html"
    if view == "run":
        args = ["report", str(f), "--out", str(out)]
    else:
        db = str(tmp_path / "h.sqlite")
        p = run_cli(["history", "import", "--db", db, str(NIGHT4), str(f)], cli_env, tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
        args = ["report", "--history", "--db", db, "--out", str(out)]
    began = time.monotonic()
    p = run_cli(args, cli_env, tmp_path)
    took = time.monotonic() - began
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr, p.stderr[-3000:]
    page = out.read_text(encoding="utf-8")
    assert "<img src=x" not in page and "\x1b" not in page
    assert ENGINE not in page and "more characters" in page
    assert took < 60, f"report {view} took {took:.0f} s"
