"""The HTML report: real runs in, self-contained pages out, rendered by a real headless browser.

Three real `lawbench run --profile cpu -k prediction` runs (no engine, ~3 s each here) make the
run records and the history every test reads; nothing in a page is written by hand.
"""
from __future__ import annotations

import base64
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from lawbench.core.commands.main import main
from lawbench.core.history.store import History
from lawbench.core.record.reports import read_json, write_json

pytest.importorskip("matplotlib", reason="the HTML report needs matplotlib (lawbench[plots])")

LAWBENCH = shutil.which("lawbench", path=os.path.dirname(sys.executable)) or "lawbench"
BROWSERS = ("chromium", "chromium-headless-shell", "chrome-headless-shell", "google-chrome")
BAND_RGB = (0x9E, 0xC5, 0xFE)  # figures.BAND_COLOUR: only the plots paint it


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "LAWBENCH_OUT"}
    environ.update(env)
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=environ, timeout=300, check=False, encoding="utf-8")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """Three real prediction runs into one --out folder: one history, three run records."""
    base = tmp_path_factory.mktemp("runs")
    out = base / "out"
    records = []
    for i in range(3):
        proc = _run([LAWBENCH, "run", "--profile", "cpu", "-k", "prediction", "--out", str(out)], base)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert (out / "report.html").is_file(), "every run writes OUT/report.html"
        records.append(shutil.copy(out / "run.json", base / f"run{i}.json"))
        shutil.copy(out / "report.html", base / f"report{i}.html")
    return {"base": base, "out": out, "db": out / "history.sqlite", "records": [Path(r) for r in records]}


def _report(*args: str, capsys) -> tuple[int, str, str]:
    rc = main(["report", *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


class _Refs(HTMLParser):
    """Every tag, and every attribute that could fetch something."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.refs: list[tuple[str, str, str]] = []
        self.row_ids: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "srcset", "poster", "data", "action", "background"):
                self.refs.append((tag, name, value or ""))
            if name == "id" and (value or "").startswith("r-"):
                self.row_ids.append(value[2:])


def _parse(text: str) -> _Refs:
    parser = _Refs()
    parser.feed(text)
    return parser


def _assert_self_contained(text: str) -> None:
    page = _parse(text)
    for tag, name, value in page.refs:
        if tag == "img" and name == "src":
            assert value.startswith("data:image/png;base64,"), value[:80]
        else:
            assert name == "href" and value.startswith("#"), (tag, name, value)  # in-page links only
    for forbidden in ("script", "link", "iframe", "object", "embed", "base"):
        assert forbidden not in page.tags, f"<{forbidden}> in a self-contained page"
    style = "".join(re.findall(r"<style>(.*?)</style>", text, re.DOTALL))
    assert "url(" not in style and "@import" not in style


def _png_size(data_uri: str) -> tuple[int, int]:
    raw = base64.b64decode(data_uri.split(",", 1)[1])
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", raw[16:24])


# --------------------------------------------------------------------------- the run page


def test_every_run_writes_its_page_and_the_page_holds_every_result(runs):
    record = read_json(runs["records"][0])
    text = (runs["base"] / "report0.html").read_text(encoding="utf-8")
    assert record.run_id in text
    assert sorted(_parse(text).row_ids) == sorted(r.anchor_id for r in record.results)
    for v, n in record.counts.items():
        if v != "history":
            assert f"<b>{n}</b> <span class=\"verdict v-{v}\">{v}</span>" in text
    _assert_self_contained(text)


def test_run_page_from_a_file_and_from_the_history_are_the_same(runs, tmp_path, capsys):
    record = read_json(runs["records"][1])
    rc, out, err = _report(str(runs["records"][1]), "--out", str(tmp_path / "a.html"), capsys=capsys)
    assert rc == 0 and err == "" and out.startswith(f"wrote {tmp_path / 'a.html'} (run {record.run_id[:12]}")
    rc, out, err = _report("--run", "latest~1", "--db", str(runs["db"]), "--out", str(tmp_path / "b.html"),
                           capsys=capsys)
    assert rc == 0, err
    a, b = (tmp_path / "a.html").read_text(encoding="utf-8"), (tmp_path / "b.html").read_text(encoding="utf-8")
    assert a == b  # the history keeps the record as written, and a page has no render time in it
    for r in record.results:
        assert f'id="r-{r.anchor_id}"' in a
        if r.reason:
            assert _html_escaped(r.reason) in a
    for field in (record.profile, record.lawbench_version, record.started, record.finished):
        assert field in a
    _assert_self_contained(a)


def _html_escaped(text: str) -> str:
    import html
    return html.escape(text, quote=True)


def test_text_from_data_files_is_escaped_and_dollars_do_not_break_plots(runs, tmp_path, capsys):
    record = read_json(runs["records"][0])
    hostile = '<script>alert("x")</script> & $\\frac{1}{0}$ \'q\''
    target = next(r for r in record.results if r.band is not None and r.predicted is not None)
    target.reason, target.unit = hostile, "$/tok"  # a $ in a plot label would otherwise start mathtext
    path = write_json(record, tmp_path / "hostile.json")
    rc, _, err = _report(str(path), "--out", str(tmp_path / "h.html"), capsys=capsys)
    assert rc == 0, err
    text = (tmp_path / "h.html").read_text(encoding="utf-8")
    assert "<script>" not in text and hostile not in text
    assert _html_escaped(hostile) in text


def test_the_page_is_the_same_byte_for_byte_each_time(runs, tmp_path, capsys):
    for name in ("x.html", "y.html"):
        assert _report(str(runs["records"][2]), "--out", str(tmp_path / name), capsys=capsys)[0] == 0
    assert (tmp_path / "x.html").read_bytes() == (tmp_path / "y.html").read_bytes()


# --------------------------------------------------------------------------- the history page


def test_history_page_shows_every_run_and_series(runs, tmp_path, capsys):
    rc, _, err = _report("--history", "--db", str(runs["db"]), "--out", str(tmp_path / "h.html"),
                           capsys=capsys)
    assert rc == 0, err
    text = (tmp_path / "h.html").read_text(encoding="utf-8")
    for path in runs["records"]:
        assert read_json(path).run_id[:12] in text
    assert "drift check unavailable" not in text  # core/history/drift.py is wired
    assert "No series moved" in text  # predictions repeat exactly: nothing can drift
    series = re.search(r"<dt>series</dt><dd>(\d+) ", text)
    live = [r for r in read_json(runs["records"][0]).results if r.retired is None]
    assert series and int(series.group(1)) == len(live)
    _assert_self_contained(text)


def test_a_drift_is_listed_with_the_first_run_that_moved(runs, tmp_path, monkeypatch):
    from lawbench.core.history.drift import Drift
    from lawbench.core.html import historypage

    with History(runs["db"], create=False) as history:
        second = history.runs(limit=None)[1]  # newest first: the middle run
        anchor = history.results(second.run_id)[0]
        drift = Drift(anchor_id=anchor.anchor_id, profile=anchor.profile, engine=anchor.engine,
                      first_run_id=second.run_id, first_started=second.started, before=1.0, after=2.0,
                      p_value=0.001, runs=3, method="step test")
        monkeypatch.setattr(historypage, "find_drifts", lambda h, p: [drift])
        text = historypage.history_page(history)
        marks = historypage._drift_index([drift], historypage.gather(history))
    assert f"#1 {second.run_id[:12]} ({second.started})" in text
    assert "1 series moved" in text
    assert marks == {(anchor.anchor_id, anchor.profile, anchor.engine): 1}


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("case", ["missing", "not-a-record", "not-json", "folder"])
def test_bad_run_file_is_one_line_and_exit_2(case, runs, tmp_path, capsys):
    path = {"missing": tmp_path / "nope.json", "not-a-record": tmp_path / "other.json",
            "not-json": runs["out"] / "junit.xml", "folder": tmp_path}[case]
    if case == "not-a-record":
        path.write_text(json.dumps({"results": []}), encoding="utf-8")
    rc, out, err = _report(str(path), "--out", str(tmp_path / "r.html"), capsys=capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and str(path) in err and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("args,says", [
    (["--run", "ffffffff"], "no run 'ffffffff' in the history"),
    (["--run", "latest~9"], "no run 'latest~9'"),
    ([], "give one of RUN.json, --run REF or --history"),
    (["--history", "--run", "latest"], "got --run and --history"),
    (["--history", "--limit", "0"], "--limit must be at least 1"),
])
def test_bad_reference_is_one_line_and_exit_2(args, says, runs, capsys):
    rc, out, err = _report(*args, "--db", str(runs["db"]), capsys=capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1 and says in err, err


def test_missing_history_is_one_line_and_exit_2(tmp_path, capsys):
    rc, _, err = _report("--history", "--db", str(tmp_path / "none.sqlite"), capsys=capsys)
    assert rc == 2 and err.count("\n") == 1 and "none.sqlite" in err and "no history here yet" in err
    assert not (tmp_path / "none.sqlite").exists()  # a read-only view creates nothing


# matplotlib made unimportable the way a missing install is: `import matplotlib` raises ImportError.
NO_MPL = "import sys; sys.modules['matplotlib'] = None; from lawbench.core.commands.main import main; sys.exit(main())"


def test_without_matplotlib_report_says_how_to_install_and_run_still_records(runs, tmp_path):
    proc = _run([sys.executable, "-c", NO_MPL, "report", str(runs["records"][0])], tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "pip install 'lawbench[plots]'" in proc.stderr
    out = tmp_path / "out"
    proc = _run([sys.executable, "-c", NO_MPL, "run", "--profile", "cpu", "-k", "prediction", "--out",
                 str(out)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "run.json").is_file() and not (out / "report.html").exists()
    assert "report" not in proc.stderr


def test_a_report_that_cannot_be_written_never_costs_the_run(tmp_path):
    out = tmp_path / "out"
    (out / "report.html").mkdir(parents=True)  # a folder where the page should go
    proc = _run([LAWBENCH, "run", "--profile", "cpu", "-k", "prediction", "--out", str(out)], tmp_path)
    assert proc.returncode == 1  # an output is missing
    lines = [line for line in proc.stderr.splitlines() if "HTML report" in line]
    assert len(lines) == 1 and str(out / "report.html") in lines[0], proc.stderr[-2000:]
    assert read_json(out / "run.json").exit_code == 0  # the verdicts themselves were fine
    with History(out / "history.sqlite", create=False) as history:
        assert len(history.runs()) == 1


# --------------------------------------------------------------------------- a real browser


def _browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(f"no headless browser installed (looked for {', '.join(BROWSERS)}); "
                "`apt-get install chromium` (CI's .ci/run does)")


def _chromium(browser: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--disable-dev-shm-usage", *args], capture_output=True, text=True, timeout=120,
                          check=False, encoding="utf-8")


# Writes each image's decoded size into the page, for --dump-dom to bring back.
PROBE = ('<script>window.addEventListener("load",()=>{const o=document.createElement("pre");'
         'o.id="natural";o.textContent=JSON.stringify([...document.images].map(i=>[i.naturalWidth,'
         'i.naturalHeight]));document.body.appendChild(o);});</script></body>')


@pytest.mark.parametrize("page", ["run", "history"])
def test_the_page_renders_in_a_real_headless_browser(page, runs, tmp_path, capsys):
    browser = _browser()
    target = tmp_path / f"{page}.html"
    args = [str(runs["records"][2])] if page == "run" else ["--history", "--db", str(runs["db"])]
    assert _report(*args, "--out", str(target), capsys=capsys)[0] == 0
    text = target.read_text(encoding="utf-8")
    expected = [_png_size(uri) for uri in re.findall(r'<img src="(data:image/png;base64,[^"]+)"', text)]
    assert expected

    probe = tmp_path / f"{page}-probe.html"
    probe.write_text(text.replace("</body>", PROBE, 1), encoding="utf-8")
    dom = _chromium(browser, "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="natural">(.*?)</pre>', dom.stdout)
    assert found, dom.stderr[-2000:]
    assert [tuple(s) for s in json.loads(found.group(1))] == expected  # every image decoded, full size

    shot = tmp_path / f"{page}.png"
    width, height = 1280, 4000
    proc = _chromium(browser, f"--screenshot={shot}", f"--window-size={width},{height}", target.as_uri())
    assert shot.is_file(), proc.stderr[-2000:]
    from matplotlib import image

    pixels = image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (height, width)
    assert float(pixels.std()) > 0.05, "the screenshot is blank"
    rgb = (pixels * 255).round().astype(int)
    band = (abs(rgb - BAND_RGB).sum(axis=-1) <= 6).sum()
    assert band > 5000, f"only {band} band-coloured pixels: the plots were not painted"
    assert math.isfinite(float(pixels.mean()))
