"""`lawbench plan` (what a night costs) and `lawbench baseline propose` (the acknowledgements a
night would need, for a person to review), and the checks `lawbench check` runs on both."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from pathlib import Path
from typing import Any, Optional

from lawbench.core.errors import DataError, UsageError


def add_gate_parsers(sub: Any) -> None:
    plan = sub.add_parser("plan", help="worst case (from budgets) and typical time (from history) of a selection")
    plan.add_argument("--profile", required=True, help="profile id")
    plan.add_argument("--cadence", choices=("quick", "nightly", "weekly", "full"), default=None,
                      help="default: the cadence the profile's nightly runs ([nightly] cadence; else nightly)")
    plan.add_argument("--history", default=None, metavar="DB", help="a history.sqlite for the typical times")
    plan.add_argument("--markdown", action="store_true",
                      help="one Markdown table row of the profile's totals: its nightly and its weekly (the README's table)")
    plan.add_argument("--week-of", default=None, metavar="YYYY-MM-DD", type=_day,
                      help="a weekly: which slice runs in the week of this day (default: today, UTC)")
    plan.set_defaults(func=cmd_plan)
    base = sub.add_parser("baseline", help="the nightly gate's reviewed standing reds")
    bsub = base.add_subparsers(dest="action", metavar="ACTION", required=True)
    prop = bsub.add_parser("propose", help="the acknowledgements a run would need, as TOML for a person to review")
    prop.add_argument("record", metavar="RUN.json")
    prop.add_argument("--who", required=True, help="who accepts them (the reviewer's name or handle)")
    prop.add_argument("--until", default=None, metavar="YYYY-MM-DD", help="until when (default: 30 days from today, UTC)")
    prop.set_defaults(func=cmd_propose)
    show = bsub.add_parser("show", help="the morning view of run records: gate verdict, what turned, acknowledged reds")
    show.add_argument("records", nargs="+", metavar="RUN.json")
    show.set_defaults(func=cmd_show)


def cmd_show(args: argparse.Namespace) -> int:
    """Markdown, one section per record (the collect step's summary leads with it)."""
    from lawbench.core.record.gate_view import gate_markdown
    from lawbench.core.record.reports import headline, read_json
    from lawbench.core.untrusted_text import markdown

    for path in args.records:
        record = read_json(path)
        if record.interrupted:  # killed at its timeout: no gate judged it, and none ever stands on it
            print(f"### ⏹ {markdown(f'{record.profile}: interrupted by {record.interrupted}: filed, never a baseline')} "
                  f"(the gate did not judge it); {markdown(headline(record))}\n")
            continue
        view = gate_markdown(record)
        print(view if view else f"### {markdown(f'{record.profile}: absolute run, {headline(record)}')}\n")
        ws = record.weekly_slice
        if ws is not None and ws.count > 1:  # which part of a rotating weekly this was (docs/RUNNERS.md)
            print(f"weekly slice {ws.index} of 0-{ws.count - 1} ({'re-run with --slice' if ws.chosen else markdown(ws.week, 40)}): "
                  f"every weekly anchor runs once in {ws.count} weeks\n")
    return 0


def _day(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a day (YYYY-MM-DD)") from None


def cmd_plan(args: argparse.Namespace) -> int:
    from lawbench.core.hardware.profiles import get_profile, plugin_profiles
    from lawbench.core.history.store import History
    from lawbench.core.claims.loading import load_all
    from lawbench.core.run.plan import plan, print_plan
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    profiles = plugin_profiles(reg)
    profile = get_profile(args.profile, profiles)
    history = History(args.history, create=False) if args.history else None
    cadence = args.cadence or (profile.nightly.cadence if profile.nightly is not None else "nightly")
    anchors = load_all(reg, profiles=profiles.keys())
    pl = plan(profile, anchors, cadence, history, profiles=profiles)
    if args.markdown:
        from lawbench.core.run.plan import weekly_cadence

        n = profile.nightly
        wk = plan(profile, anchors, weekly_cadence(profile), history, profiles=profiles)
        typical = "-" if pl.typical_min is None else f"{pl.typical_min:.0f}"
        print(f"| {profile.id} | {'yes' if n and n.deployed else 'no'} | {(n.box if n and n.box else '-')} | "
              f"{pl.cadence} | {len(pl.rows)} | {pl.worst_min:.0f} | {typical} | "
              f"{n.window_min if n else '-'} | {len(wk.rows)} | {wk.worst_min:.0f} | {wk.window_min or '-'} | "
              f"{wk.rotation.count if wk.rotation else 1} |")
        return 0 if pl.fits and wk.fits else 1
    print_plan(pl, day=args.week_of)
    if not pl.fits:
        print(f"lawbench: the {pl.cadence} worst case does not fit profile {profile.id}'s window: "
              f"`lawbench check` refuses it")
        return 1
    return 0


def _proposals(record: Any) -> list[tuple[str, str, str, Any, Any]]:
    """(anchor id, why, news kind, value, counts) for every red the record's night would need
    accepted: an acknowledgement names what was seen, not only the anchor."""
    from lawbench.core.models.gate import UNACKNOWLEDGEABLE

    if record.gate is not None:
        return [(n.anchor_id, f"{n.kind}: {n.why}", n.kind, n.measured, n.counts) for n in record.gate.news
                if n.red and n.anchor_id != "(gate)" and n.kind not in UNACKNOWLEDGEABLE]
    return [(r.anchor_id, f"{r.verdict.value}: {r.reason}", "error" if r.verdict.value == "ERROR" else "turned",
             r.measured, None) for r in record.results if r.blocking]


def cmd_propose(args: argparse.Namespace) -> int:
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.claims.loading import load_all
    from lawbench.core.laws.registry import get_registry
    from lawbench.core.record.reports import read_json

    from lawbench.core.history.upgrade import UPGRADE_CLAIM, is_upgrade_news

    from lawbench.core.history.gate import today

    record = read_json(args.record)
    try:  # 30 days from today as the gate counts days (UTC), not the proposer's local day (issue 35)
        until = dt.date.fromisoformat(args.until) if args.until else today() + dt.timedelta(days=30)
    except ValueError:
        raise UsageError(f"--until {args.until!r} is not a date (YYYY-MM-DD)") from None
    reg = get_registry()
    anchors = load_all(reg, profiles=plugin_profiles(reg).keys()).by_id()
    wanted = _proposals(record)
    print(f"# Proposed by `lawbench baseline propose {args.record}` for run {record.run_id} "
          f"({record.started}): review each entry, say why it is accepted, then commit it as "
          f"hardware_profiles/acknowledged/{record.profile}.toml (merge with what is there).")
    print(f'profile = "{record.profile}"')
    for anchor_id, why, kind, value, counts in wanted:
        la = anchors.get(anchor_id)
        claim = la.anchor.claim if la is not None else UPGRADE_CLAIM if is_upgrade_news(anchor_id) \
            else "(anchor no longer exists: drop this entry)"
        print("\n[[acknowledged]]")
        print(f"anchor = {json.dumps(anchor_id)}")
        print(f"why = {json.dumps('TO REVIEW: ' + ' '.join(why.split())[:300])}")
        print(f"kind = {json.dumps(kind)}")
        if value is not None:
            print(f"value = {value!r}")
        if counts:
            print("counts = { " + ", ".join(f"{json.dumps(k)} = {v}" for k, v in sorted(counts.items())) + " }")
        print(f"claim = {json.dumps(claim)}")
        print(f"accepted_by = {json.dumps(args.who)}")
        print(f"until = {until.isoformat()}")
    if not wanted:
        print("# nothing to accept: the night was green")
    return 0


MAX_ACK_DAYS = 90  # an acknowledgement is reviewed again at least this often
WARN_ACK_DAYS = 7  # `check` says which expire this soon
_PROPOSAL = re.compile(r"^\W*to\s*review\b", re.IGNORECASE)  # the proposal's marker, however cased or spaced


def reviewers(folder: Any) -> Optional[set[str]]:
    """hardware_profiles/acknowledged/reviewers.toml's `reviewers`: who may accept a red (None: no list)."""
    from lawbench.core.toml_read import read_toml

    f = folder / "reviewers.toml"
    if not f.is_file():
        return None
    names = read_toml(f).get("reviewers")
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        raise DataError(str(f), "a list of reviewer handles is needed", field="reviewers")
    return set(names)


def acknowledged_problems(anchors: Any, profiles: dict[str, Any], today: Optional[dt.date] = None,
                          folder: Any = None, warnings: Optional[list[str]] = None) -> list[str]:
    """What `lawbench check` refuses in hardware_profiles/acknowledged/*.toml: a file that does not
    parse, names an unknown profile, acknowledges an anchor that no longer exists (or does not run
    on that profile), quotes a claim other than the anchor's, runs more than 90 days ahead, still
    carries the proposal's marker, or is accepted by someone not in reviewers.toml.

    A date never stops a run (issue 30, item 1): an entry past its date or within 7 days of it is a
    warning appended to ``warnings``; on its night the gate makes that anchor red instead."""
    from lawbench.core.history.gate import acknowledged_path, load_acknowledged, today as _today
    from lawbench.core.history.upgrade import UPGRADE_CLAIM, is_upgrade_news

    day = today or _today()
    by_id = anchors.by_id()
    folder = folder if folder is not None else acknowledged_path("x").parent
    problems: list[str] = []
    warned = warnings if warnings is not None else []
    if not folder.is_dir():
        return problems
    try:
        allowed = reviewers(folder)
    except DataError as exc:
        problems.append(str(exc))
        allowed = None
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".toml") or entry.name == "reviewers.toml":
            continue
        pid = entry.name[:-len(".toml")]
        name = f"hardware_profiles/acknowledged/{entry.name}"
        if pid not in profiles:
            problems.append(f"{name}: no profile {pid!r}; known: {', '.join(sorted(profiles))}")
            continue
        try:
            ack = load_acknowledged(pid, str(entry) if isinstance(entry, Path) else None)
        except DataError as exc:
            problems.append(str(exc))
            continue
        for i, a in enumerate(ack.acknowledged if ack else []):
            where = f"{name}: anchor {a.anchor}: field acknowledged[{i}]"
            la = by_id.get(a.anchor)
            if is_upgrade_news(a.anchor):  # an engine upgrade's rate series (docs/gate.md): no anchor to quote
                if a.claim != UPGRADE_CLAIM:
                    problems.append(f"{where}.claim: an upgrade's acknowledgement quotes {UPGRADE_CLAIM!r}")
            elif la is None or not la.anchor.runs:
                problems.append(f"{where}.anchor: no active anchor {a.anchor!r} any more: remove the entry")
                continue
            elif la.anchor.kind != "prediction" and la.anchor.profiles and pid not in la.anchor.profiles:
                problems.append(f"{where}.anchor: the anchor does not run on profile {pid!r}")
            if la is not None and a.claim != la.anchor.claim:
                problems.append(f"{where}.claim: not the anchor's claim word for word (it says: {la.anchor.claim!r}); "
                                "the claim changed, so review the acknowledgement again")
            if a.until > day + dt.timedelta(days=MAX_ACK_DAYS):
                problems.append(f"{where}.until: {a.until.isoformat()} is more than {MAX_ACK_DAYS} days ahead "
                                f"(at most {(day + dt.timedelta(days=MAX_ACK_DAYS)).isoformat()}): review it again by then")
            if a.until < day:
                warned.append(f"{where}.until: {a.until.isoformat()} has passed: the gate makes this anchor red "
                              "(acknowledgement expired) until the entry is renewed after review or removed")
            elif a.until <= day + dt.timedelta(days=WARN_ACK_DAYS):
                warned.append(f"{where}.until: expires on {a.until.isoformat()}: renew it after review, or remove it")
            if _PROPOSAL.search(a.why):
                problems.append(f"{where}.why: still the proposal's text: say why the red is accepted")
            if allowed is not None and a.accepted_by not in allowed:
                problems.append(f"{where}.accepted_by: {a.accepted_by!r} is not in "
                                "hardware_profiles/acknowledged/reviewers.toml")
            elif allowed is None:
                problems.append(f"{where}.accepted_by: no hardware_profiles/acknowledged/reviewers.toml "
                                f"to check {a.accepted_by!r} against")
    return problems
