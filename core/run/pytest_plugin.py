"""Anchors as pytest items (pytest's "non-python tests" pattern), shipped as a pytest11 plugin.

Inert unless ``--lawbench-profile`` is given, so it never touches an ordinary test session: the
anchor session (lawbench.core.run.session) is imported and registered only then.
Selection (-k), JUnit XML and skip reasons come from pytest; VOID gets its own letter (V) and word
in the summary. The run itself — evaluation, the record, the exit status — is the Run
(lawbench.core.run) the items call. ``lawbench run`` is a thin front door over this.
"""
from __future__ import annotations

import pytest

ANCHOR_KINDS = ("prediction", "measurement", "agreement", "ratio", "census")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lawbench", "lawbench anchors")
    group.addoption("--lawbench-profile", default=None, metavar="ID",
                    help="collect the anchors for this hardware profile ('detect' picks this machine's)")
    group.addoption("--lawbench-law", action="append", default=[], metavar="LAW",
                    help="only this law's anchors (repeatable)")
    group.addoption("--lawbench-strict", action="store_true", help="every skip is a failure")
    group.addoption("--lawbench-out", default="lawbench-out", metavar="DIR",
                    help="where the run record, Markdown summary and history go")
    group.addoption("--lawbench-llama-dir", default=None, metavar="DIR",
                    help="use this llama.cpp build instead of building the pinned one")
    group.addoption("--lawbench-cadence", default="full", choices=("quick", "nightly", "weekly", "full"),
                    help="which anchors by how often they run (default: all)")
    group.addoption("--lawbench-no-history", action="store_true", help="do not append to the history store")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "lawbench_anchor: an anchor collected by lawbench")
    for kind in ANCHOR_KINDS:
        config.addinivalue_line("markers", f"{kind}: a lawbench {kind} anchor")
    if config.getoption("lawbench_profile"):
        # Only now does lawbench load: an ordinary test session never imports more than this file.
        from lawbench.core.run.session import start_session

        start_session(config)
