"""Field-by-field check of the before/after run records that commands.sh kept (OUT/before, OUT/after):
the record's shape (its keys), every result's verdict, and for what is deterministic — predictions,
census label counts, a planted fault's census counts and its proof — identical values.
Usage: python same_values.py OUT"""
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
DETERMINISTIC = ("verdict", "kind", "published", "predicted", "band", "unit", "quantity", "census_counts",
                 "census_judged", "open_finding", "listed_only", "strict_skip", "retired")
bad = 0
for step in ("predictions", "census", "ab", "plant"):
    a, b = (json.loads((out / t / f"{step}.run.json").read_text()) for t in ("before", sys.argv[2] if len(sys.argv) > 2 else "after"))
    diffs = []
    if set(a) != set(b):
        diffs.append(f"record keys differ: {sorted(set(a) ^ set(b))}")
    for key in ("schema_version", "mode", "profile", "exit_code", "counts", "interrupted", "settings", "cadence"):
        va, vb = a.get(key), b.get(key)
        if key == "settings":
            va, vb = ({k: v for k, v in (x or {}).items() if k != "host"} for x in (va, vb))
        if va != vb:
            diffs.append(f"{key}: {va!r} -> {vb!r}")
    ra, rb = ({r["anchor_id"]: r for r in rec["results"]} for rec in (a, b))
    if list(ra) != list(rb):
        diffs.append(f"result ids differ: {sorted(set(ra) ^ set(rb))}")
    measured = 0
    for rid in ra.keys() & rb.keys():
        x, y = ra[rid], rb[rid]
        if set(x) != set(y):
            diffs.append(f"{rid}: result keys differ {sorted(set(x) ^ set(y))}")
        fields = DETERMINISTIC + (("measured",) if x["kind"] == "prediction" or x.get("census_counts") else ())
        for f in fields:
            if x.get(f) != y.get(f):
                diffs.append(f"{rid}.{f}: {x.get(f)!r} -> {y.get(f)!r}")
        if (x.get("plant") or {}).get("fault"):
            fx, fy = x["plant"]["fault"], y["plant"]["fault"]
            for f in ("proved", "problems", "breaks"):
                if fx.get(f) != fy.get(f):
                    diffs.append(f"{rid}.plant.fault.{f}: {fx.get(f)!r} -> {fy.get(f)!r}")
            if (fx["result"] or {}).get("census_counts") != (fy["result"] or {}).get("census_counts"):
                diffs.append(f"{rid}.plant.fault.result.census_counts differ")
        if x.get("measured") is not None and x["kind"] != "prediction" and not x.get("census_counts"):
            measured += 1
    print(f"{step}: {a['run_id'][:14]} -> {b['run_id'][:14]}: {len(ra)} results, exit {a['exit_code']} -> "
          f"{b['exit_code']}, counts {'same' if a['counts'] == b['counts'] else 'DIFFER'}; "
          + (f"{len(diffs)} difference(s)" if diffs else "no difference in shape, verdicts or deterministic values")
          + (f" ({measured} measured value(s) compared by verdict only)" if measured else ""))
    for d in diffs:
        print("   ", d)
    bad += len(diffs)
sys.exit(1 if bad else 0)
