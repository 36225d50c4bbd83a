"""Anchors as pytest items: one file of anchors is a pytest File, one anchor an Item whose
runtest() asks the run (lawbench.core.run.Run) to evaluate it and turns the verdict into pytest's
outcome. The run's AnchorSession (lawbench.core.run.session) is found by name."""
from __future__ import annotations

from typing import Any, Callable, Optional

import pytest

from lawbench.core.laws.law import Law
from lawbench.core.claims.loading import LoadedAnchor
from lawbench.core.models import Result, Verdict

SESSION_NAME = "lawbench-session"


class AnchorVerdict(Exception):
    """Raised by an item whose verdict is FAIL, ERROR or VOID; carries the Result."""

    def __init__(self, result: Result):
        super().__init__(result.reason)
        self.result = result


class AnchorFile(pytest.File):
    def collect(self):
        session = self.config.pluginmanager.get_plugin(SESSION_NAME)
        for loaded in session.anchors_in(self.path):
            yield AnchorItem.from_parent(self, name=loaded.anchor.id, loaded=loaded,
                                         law=session.registry.law(loaded.anchor.law))


class AnchorItem(pytest.Item):
    def __init__(self, *, loaded: LoadedAnchor, law: Law, **kwargs: Any):
        super().__init__(**kwargs)
        self.loaded = loaded
        self.anchor = loaded.anchor
        self.law = law
        self.result: Optional[Result] = None
        self.add_marker(pytest.mark.lawbench_anchor)
        self.add_marker(getattr(pytest.mark, self.anchor.kind))
        self.keywords[self.anchor.law] = True

    def runtest(self) -> None:
        run = self.config.pluginmanager.get_plugin(SESSION_NAME).run
        (self.result,) = run.evaluate(self.loaded)  # a stop signal goes on up
        if self.result.verdict is Verdict.SKIP:
            pytest.skip(self.result.reason)
        if self.result.open_finding:
            pytest.xfail(self.result.reason)
        if self.result.verdict.bad:
            raise AnchorVerdict(self.result)

    def repr_failure(self, excinfo, style=None):  # type: ignore[override]
        if isinstance(excinfo.value, AnchorVerdict):
            r = excinfo.value.result
            lines = [f"{r.verdict.value} {r.anchor_id}: {r.reason}"]
            lines.append(f"  claim: {self.anchor.claim}")
            lines.append(f"  file: {self.loaded.file}")
            return "\n".join(lines)
        if isinstance(excinfo.value, pytest.xfail.Exception):
            # An open finding (pytest.xfail above): its reason is the whole report. pytest's own
            # traceback of it parses every module on the stack, ~0.3 s per finding, for text no
            # one shows (-ra prints the reason).
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"{self.anchor.law}::{self.anchor.id} [{self.anchor.kind}]"


def selection(expr: str) -> Any:
    """pytest's -k expression compiled, so a bad one is refused in one line before anything runs.

    :raises UsageError: the expression does not parse (pytest would print a multi-line usage error).
    """
    from _pytest.mark.expression import Expression

    from lawbench.core.errors import UsageError

    if not expr.strip():  # `-k "$SEL"` with SEL unset would otherwise select everything
        raise UsageError("-k is empty: give a selection expression (e.g. -k \"law4 and not kv\"), "
                         "or leave -k out to select every anchor")
    try:
        return Expression.compile(expr)
    except Exception as exc:  # SyntaxError on pytest 9, ParseError before: both mean a bad -k
        raise UsageError(f"-k {expr!r} is not a selection expression: {exc}; "
                         "e.g. -k \"law4 and not kv\"") from None


def keyword_filter(expr: Optional[str]) -> Callable[[LoadedAnchor], bool]:
    """pytest's -k language over what an anchor item answers to: its id, law, kind and file name.

    For anchors that are not items: retired anchors in a run, speed anchors in `lawbench ab`.
    """
    if expr is None:
        return lambda loaded: True
    compiled = selection(expr)

    def keep(loaded: LoadedAnchor) -> bool:
        a = loaded.anchor
        names = [a.id, a.law, a.kind, str(loaded.file).rsplit("/", 1)[-1]]
        return compiled.evaluate(lambda sub, **_: any(sub.lower() in n.lower() for n in names))
    return keep
