"""`lawbench profiles`: list profiles, detect this machine's profile, measure its RAM bandwidth.

The main CLI calls `add_profiles_parser(subparsers)` once and `profiles_command(args)` when the
`profiles` command was chosen. Plugin profile folders arrive as `extra_dirs` (or
`args.profile_dirs`), else come from the plugin registry; `--profile-dir` adds a folder.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, Iterable, Optional

from pydantic import ValidationError

from lawbench.core.errors import LawbenchError
# A runner job's limits live with the planning that must fit them.
from lawbench.core.run.plan import JOB_LIMIT_MIN, WEEKLY_JOB_MIN, weekly_cadence, weekly_window_min
from lawbench.core.hardware.profiles import Laws, get_profile, load_profiles, usable_plugin_dirs
from lawbench.core.laws.registry import get_registry
from lawbench.core.models import Fact, HardwareProfile, Tier

if TYPE_CHECKING:  # rich and the bandwidth probe (numpy) load with the action that uses them, not
    from rich.console import Console  # with every `lawbench` command's parser



def add_profiles_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "profiles", help="list hardware profiles, detect this machine's, measure its RAM",
        description="With no action: list every hardware profile.")
    parser.add_argument("--profile-dir", action="append", default=[], metavar="DIR",
                        help="also load profiles from DIR (repeatable)")
    parser.set_defaults(func=profiles_command, profiles_action="list")
    actions = parser.add_subparsers(title="actions", metavar="ACTION")

    lst = actions.add_parser("list", help="list profiles (the default)")
    lst.set_defaults(profiles_action="list")

    show = actions.add_parser("show", help="every fact of one profile, with its source")
    show.add_argument("profile_id", metavar="ID")
    show.set_defaults(profiles_action="show")

    det = actions.add_parser("detect", help="fingerprint this machine and pick its profile")
    det.add_argument("--json", action="store_true", help="print JSON instead of tables")
    det.add_argument("--expect", metavar="ID",
                     help="exit 1 unless this machine matches profile ID (refuse a wrong runner)")
    det.set_defaults(profiles_action="detect")

    run = actions.add_parser("runners", help="the nightly's job matrix: one job per box of deployed profiles")
    run.add_argument("--only", metavar="IDS", action="append", default=None,
                     help="comma-separated profile ids (repeatable), or 'all' (default)")
    run.add_argument("--github-output", action="store_true",
                     help="print `matrix=<json>` for $GITHUB_OUTPUT instead of the JSON alone")
    run.add_argument("--weekly", action="store_true",
                     help="the weekly job's plan: the rest of each profile's nightly, with the weekly deadline")
    run.set_defaults(profiles_action="runners")

    mea = actions.add_parser("measure", help="measure RAM bandwidth and write a profile")
    mea.add_argument("--out", metavar="FILE", help="where to write (default: <id>.toml)")
    mea.add_argument("--threads", type=int, help="reader threads (default: usable CPUs)")
    mea.add_argument("--size-mb", type=int, help="test array size in MiB (default: 1024)")
    mea.add_argument("--repeats", type=int, default=7, help="timed passes (default: 7)")
    mea.add_argument("--base", default="cpu", help="profile to start from (default: cpu)")
    mea.add_argument("--id", dest="new_id", help="id of the written profile")
    mea.add_argument("--json", action="store_true", help="print the result as JSON")
    mea.set_defaults(profiles_action="measure")
    return parser


def profiles_command(args: argparse.Namespace, extra_dirs: Optional[Iterable[Any]] = None) -> int:
    from rich.console import Console

    console = Console()
    try:
        if extra_dirs is None:
            extra_dirs = getattr(args, "profile_dirs", None)
        registry = get_registry()  # each law checks its table of every profile, as `lawbench run` does
        if extra_dirs is None:  # plugins' folders (lawbench_profile_dirs), as `lawbench run` sees them
            extra_dirs = usable_plugin_dirs(registry)
        dirs = [*extra_dirs, *(getattr(args, "profile_dir", None) or [])]
        action = getattr(args, "profiles_action", "list")
        if action == "measure":
            return _measure(args, dirs, console, registry.laws)
        profiles = load_profiles(dirs, registry.laws)
        if action == "show":
            return _show(get_profile(args.profile_id, profiles), console)
        if action == "detect":
            return _detect(args, profiles, console)
        if action == "runners":
            return _runners(args, profiles)
        return _list(profiles, console)
    except LawbenchError as exc:
        print(f"lawbench profiles: {exc}", file=sys.stderr)
        return 2


# --------------------------------------------------------------------------- actions


def _list(profiles: dict[str, HardwareProfile], console: Console) -> int:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="hardware profiles", show_lines=True)
    for col in ("id", "description", "tiers (capacity · spec / measured bandwidth)",
                "per-law facts (`profiles show ID`)", "runner labels"):
        table.add_column(col, overflow="fold")
    for p in profiles.values():
        tiers = "\n".join(_tier_line(t) for t in p.tiers)
        laws = "\n".join(f"{law}: {len(_law_facts(table, ()))} facts" for law, table in p.laws.items()) or "—"
        table.add_row(*map(escape, (p.id + (" (generic)" if p.fingerprint.generic else ""),
                                    p.description, tiers, laws, ", ".join(p.runner_labels))))
    console.print(table)
    return 0




def runner_matrix(profiles: dict[str, HardwareProfile], only: str = "all", weekly: bool = False,
                  anchors: Any = None) -> dict[str, Any]:
    """The nightly's (or the weekly's) matrix, from the profiles: one job per box of deployed
    profiles ([nightly] deployed = true). Profiles that share a box ([nightly] box) run in one job,
    one after the other under one lock, on the runner that carries all their labels. Each job's
    `plan` is "profile:cadence:deadline-minutes …" for scripts/nightly_runner.sh. Given the anchors,
    a weekly leaves out a profile whose weekly selects nothing (a run of nothing exits 2, so it
    would be red every Saturday), and a box left with no profile has no job. A weekly profile's
    deadline is its weekly window (weekly_window_min), the window its slices were cut to fit."""
    from lawbench.core.errors import UsageError

    wanted = [x.strip() for x in only.split(",") if x.strip()] if only.strip() != "all" else None
    if wanted == []:
        raise UsageError(f"--only {only!r} names no profile; give profile ids (comma-separated) or 'all'")
    for pid in wanted or ():
        get_profile(pid, profiles)  # unknown id: one line listing the known ones
        if not profiles[pid].runner_labels:
            raise UsageError(f"profile {pid!r} has no runner_labels, so no runner job; add them to its file")
        if profiles[pid].nightly is None or not profiles[pid].nightly.deployed:
            raise UsageError(f"profile {pid!r} is not deployed (hardware_profiles/{pid}.toml: [nightly] deployed = "
                             "true once its runner is registered), so it has no runner job")
    chosen = [p for p in sorted(profiles.values(), key=lambda p: p.id)
              if p.runner_labels and p.nightly is not None and p.nightly.deployed
              and (wanted is None or p.id in wanted)]
    if not chosen:
        raise UsageError("no deployed profile with runner_labels: the nightly would have no job")
    if weekly and anchors is not None:
        from lawbench.core.run.plan import plan as plan_of
        chosen = [p for p in chosen if plan_of(p, anchors, weekly_cadence(p)).rows]
    boxes: dict[str, list[HardwareProfile]] = {}
    for p in chosen:
        boxes.setdefault(p.nightly.box or p.id, []).append(p)
    jobs = []
    for box, members in sorted(boxes.items()):
        labels = list(dict.fromkeys(label for p in members for label in p.runner_labels))
        plan = " ".join(f"{p.id}:{weekly_cadence(p) if weekly else p.nightly.cadence}:"
                        f"{weekly_window_min(p, profiles) if weekly else p.nightly.window_min}" for p in members)
        jobs.append({"box": box, "profile": " ".join(p.id for p in members), "runs-on": labels, "plan": plan,
                     "timeout": WEEKLY_JOB_MIN if weekly else JOB_LIMIT_MIN})
    seen: dict[tuple[str, ...], str] = {}
    for job in jobs:  # a runner must pick up one box's job only
        key = tuple(sorted(job["runs-on"]))
        if key in seen:
            raise UsageError(f"profiles {seen[key]!r} and {job['profile']!r} carry the same runner labels "
                             f"{list(key)}: a runner would take either job; give each its own label")
        seen[key] = job["profile"]
    return {"include": jobs}


def _runners(args: argparse.Namespace, profiles: dict[str, HardwareProfile]) -> int:
    anchors = None
    if args.weekly:
        from lawbench.core.claims.loading import load_all
        from lawbench.core.laws.registry import get_registry
        anchors = load_all(get_registry(), profiles=profiles.keys())
    matrix = json.dumps(runner_matrix(profiles, ",".join(args.only or ["all"]), weekly=args.weekly, anchors=anchors),
                        separators=(",", ":"))
    print(f"matrix={matrix}" if args.github_output else matrix)
    return 0


def _tier_line(t: Tier) -> str:
    cap = f"{t.capacity_gb.value:g} GB" if t.capacity_gb else "? GB"
    spec = f"{t.bandwidth_spec_gbs.value:g}" if t.bandwidth_spec_gbs else "—"
    meas = f"{t.bandwidth_measured_gbs.value:g}" if t.bandwidth_measured_gbs else "—"
    return f"{t.name} ({t.kind}): {cap} · {spec} / {meas} GB/s"


def _show(p: HardwareProfile, console: Console) -> int:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"{p.id}: {p.description}"), show_lines=True)
    for col in ("fact", "value", "source"):
        table.add_column(col, overflow="fold")
    for key, fact in _facts(p):
        table.add_row(*map(escape, (key, f"{fact.value:g}" + (" [est]" if fact.estimate else ""),
                                    fact.source)))
    console.print(table)
    console.print(escape(f"fingerprint: {p.fingerprint.model_dump(exclude_defaults=True)}"))
    console.print(escape(f"memory reading: {p.memory_reading}; threads: {p.threads or '—'}; "
                         f"runner labels: {', '.join(p.runner_labels)}"))
    for note in p.notes:
        console.print(escape(f"• {note}"))
    return 0


def _facts(p: HardwareProfile) -> list[tuple[str, Fact]]:
    rows = []
    for t in p.tiers:
        for name in ("capacity_gb", "bandwidth_spec_gbs", "bandwidth_measured_gbs"):
            if getattr(t, name) is not None:
                rows.append((f"tiers.{t.name}.{name}", getattr(t, name)))
    for law, table in p.laws.items():
        rows += [(".".join(("laws", law, *path)), fact) for path, fact in _law_facts(table, ())]
    return rows


def _law_facts(table: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Fact]]:
    """Every fact of a law's table ({ value = …, source = … } at any depth), with its path. Core
    reads a law's table only as facts, whatever the law calls them; the law validated it at load."""
    if not isinstance(table, dict):
        return []
    if "value" in table and "source" in table:
        try:
            return [(path, Fact.model_validate({k: table[k] for k in ("value", "source", "estimate") if k in table}))]
        except ValidationError:  # a table of a law not installed here, never validated: not shown
            return []
    return [row for key, sub in table.items() for row in _law_facts(sub, (*path, str(key)))]


def _detect(args: argparse.Namespace, profiles: dict[str, HardwareProfile],
            console: Console) -> int:
    from rich.markup import escape
    from rich.table import Table

    from lawbench.core.hardware import detect  # psutil: loaded by the action that reads the machine

    fp = detect.fingerprint_machine()
    chosen, reasons = detect.match_profile(fp, profiles)
    matches = {pid: detect.profile_matches(fp, p) for pid, p in profiles.items()}
    expect = getattr(args, "expect", None)
    if expect:
        expected = get_profile(expect, profiles)
        ok, why = detect.match_reasons(fp, expected)
    if args.json:
        out: dict[str, Any] = {"fingerprint": fp.model_dump(), "profile": chosen,
                               "reasons": reasons, "matches": matches}
        if expect:
            out["expect"] = {"profile": expect, "matches": ok, "reasons": why}
        print(json.dumps(out, indent=2))
    else:
        table = Table(title="this machine", show_header=False)
        for key, value in fp.model_dump(exclude={"gpus"}).items():
            table.add_row(key, escape(", ".join(value) if isinstance(value, list) else str(value)))
        for g in fp.gpus:
            table.add_row(f"gpu {g.index}", escape(f"{g.name} · cc {g.compute_capability} · "
                                                   f"{g.memory_total_gb} GiB · driver {g.driver} · via {g.source}"))
        console.print(table)
        console.print(f"profile: [bold]{escape(chosen)}[/bold]")
        for r in reasons:
            console.print(escape(f"  {r}"))
        if expect:
            console.print(escape(f"expected {expect}: {'matches' if ok else 'DOES NOT MATCH'}"))
            for r in why:
                console.print(escape(f"  {r}"))
    if expect and not ok:
        print(f"lawbench profiles: this machine does not match profile {expect!r}; refusing to "
              f"run as it ({'; '.join(r for r in why if r.startswith('no:'))})", file=sys.stderr)
        return 1
    return 0


def _measure(args: argparse.Namespace, dirs: list[Any], console: Console, laws: Laws) -> int:
    from rich.markup import escape

    from lawbench.core.hardware import bandwidth

    path, profile, result = bandwidth.write_measured_profile(
        base=args.base, out=args.out, threads=args.threads, size_mb=args.size_mb,
        repeats=args.repeats, profile_id=args.new_id, extra_dirs=dirs, laws=laws)
    if args.json:
        print(json.dumps({"file": str(path), "profile": profile.id, **result.model_dump()},
                         indent=2))
        return 0
    console.print(f"RAM read bandwidth: [bold]{result.median_gbs:g} GB/s[/bold] "
                  f"(median of {len(result.samples)}: {', '.join(f'{s:g}' for s in result.samples)}; "
                  f"{result.threads} threads, {result.size_bytes // bandwidth.MIB} MiB)")
    console.print(escape(f"wrote profile {profile.id!r} to {path}"))
    console.print(escape(f"use it: LAWBENCH_PROFILE_DIRS={path.resolve().parent} lawbench run --profile {profile.id}"))
    # A measured bandwidth is all it adds: each law's constants ([laws.<law>]) are the base's, and
    # a law that needs more of this machine says what when it prices (`lawbench predict`).
    kept = ", ".join(f"[laws.{law}]" for law in profile.laws) or "none"
    console.print(escape(f"per-law constants kept from profile {args.base!r}: {kept}"))
    return 0
