"""HTML reports: one self-contained page per run and per history, with matplotlib plots.

    run_page(record) -> str                        one run (core/html/runpage.py)
    history_page(history, profile, limit) -> str   the history (core/html/historypage.py)
    write_page(text, path) -> Path                 write it, naming the file on failure
    write_run_report(record, path) -> str | None   what `lawbench run` calls: the problem, if any

Pages embed every image as a base64 PNG and carry their own style: no scripts, no fonts, no
external references, so a page reads the same from an artifact, from Pages or offline.
matplotlib is optional (`lawbench[plots]`); require_matplotlib() says how to get it.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from lawbench.core.errors import UsageError
from lawbench.core.html.figures import plots_available, require_matplotlib
from lawbench.core.html.historypage import history_page
from lawbench.core.html.runpage import run_page
from lawbench.core.paths import writable_dir

if TYPE_CHECKING:
    from lawbench.core.record.reports import RunRecord


def write_page(text: str, path: Path) -> Path:
    """Write the page to ``path`` (its folder made if need be).

    :raises UsageError: naming the file when it cannot be written.
    """
    writable_dir(path.parent, f"report {path}: its folder", fix="give a writable --out")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write the report {path}: {exc.strerror or exc}; give a writable --out") from None
    return path


def write_run_report(record: "RunRecord", path: Path) -> Optional[str]:
    """The run's page at ``path`` when matplotlib is installed; returns None, or the one-line
    problem when the page could not be made. Never raises: the page is a view of a record that is
    already safe, and a plotting bug must not cost the run."""
    if not plots_available():
        return None
    try:
        write_page(run_page(record), path)
    except Exception as exc:  # noqa: BLE001 - any failure is reported by the run, never raised
        return f"cannot write the HTML report {path}: {type(exc).__name__}: {exc}"
    return None


__all__ = ["history_page", "plots_available", "require_matplotlib", "run_page", "write_page",
           "write_run_report"]
