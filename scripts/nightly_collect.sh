#!/usr/bin/env bash
# The nightly's collecting step: carry the history forward from one night to the next.
#
#   scripts/nightly_collect.sh DATA TONIGHT SITE [QUARANTINE]
#
# DATA       a checkout of the data branch `lawbench-history`: runs/<profile>/<run_id>.json holds
#            every runner's record ever (text, append-only; a record already there is never
#            rewritten), each beside the binding the collect verified (<run_id>.binding.json)
# TONIGHT    the runner jobs' artifacts as scripts/nightly_fetch.sh leaves them (DEST/<artifact>/
#            and DEST/<artifact>.fetch.json); a missing folder is a night with no artifacts
# SITE       where the pages go: index.html (the history report) and runs/<run_id>.html
# QUARANTINE where a refused record is copied beside a .reason.txt (default: a scratch folder)
#
# One code path: tonight's run.json files go through one `lawbench history import
# --require-binding --quarantine QUARANTINE --file-into DATA`. A record is filed as a runner's only
# when its binding to the workflow run that made it verifies (docs/history.md); every other file —
# a forgery, a contribution dropped into an artifact, a malformed record — is refused, quarantined
# and named, and the rest are still filed, reported and pushed. A record of a night killed at its
# timeout (interrupted: the runner script binds it on SIGTERM) is filed like any other and named
# INTERRUPTED: the gate never takes it as a baseline, and the morning view says so. The history is
# rebuilt from the whole branch every night (the import is idempotent), so the SQLite file is never
# a second source of truth. Every file under TONIGHT is named: filed, refused (why), or passed over
# (not a run.json); a run.json the import gave no word on is named too, and fails the step. Exit 0;
# 3 when a record was refused or neither filed nor refused (after everything else was done); 1 when
# the import itself failed.
set -euo pipefail
if [ $# -lt 3 ] || [ $# -gt 4 ]; then echo "usage: $0 DATA TONIGHT SITE [QUARANTINE]" >&2; exit 2; fi
data=$1 tonight=$2 site=$3
mkdir -p "$data/runs" "$site/runs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
quarantine=${4:-$work/quarantine}
db="$work/history.sqlite"

# 1. Every earlier night (none on the first: the import then only creates the history), and the
#    contributions a maintainer filed (docs/history.md): shown as such, never a runner's state.
lawbench history import --db "$db" "$data/runs" ||
  echo "nightly_collect: warning: some records already on the data branch were refused (above); the others are in the history"
if [ -d "$data/contributions" ]; then
  lawbench history import --db "$db" --contribution "$data/contributions" ||
    echo "nightly_collect: warning: some filed contributions were refused (above)"
fi

# 2. Tonight's records: one import of the artifacts folder, each record bound to its workflow run
#    (a run.json anywhere but <artifact>/<profile>/run.json is refused too), refused ones quarantined.
found=()
if [ -d "$tonight" ]; then
  # a link named run.json is seen too: the import refuses it by name (a folder is never followed out of)
  mapfile -d '' -t found < <(find "$tonight" -name run.json \( -type f -o -type l \) -print0 | LC_ALL=C sort -z)  # byte order, whatever the locale
else
  echo "nightly_collect: no folder $tonight: no runner job left an artifact tonight"
fi
[ ${#found[@]} -gt 0 ] || echo "nightly_collect: no run.json under $tonight: no runner job left a record tonight"
failed=0
printf '[]' > "$work/tonight.json"
if [ ${#found[@]} -gt 0 ]; then
  set +e
  lawbench history import --db "$db" --require-binding --quarantine "$quarantine" --file-into "$data" --json \
    "$tonight" > "$work/tonight.json"
  rc=$?
  set -e
  [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ] || { failed=1; echo "nightly_collect: the import failed (exit $rc)" >&2; }
fi
# Every file it saw, named: a record filed as a runner's (run id, file), a file refused (file, reason),
# a run.json the import gave no word on (neither: the step fails), and the artifacts' other files
# (junit.xml, report.html, bundle.json …: passed over, never read as records), one line.
python3 - "$work/tonight.json" "$work/filed.txt" "$work/refused.txt" "$work/neither.txt" "$work/passed.txt" \
  "$tonight" "$work/summary-files.md" <<'EOF'
import json, os, sys
from lawbench.core.untrusted_text import markdown_code, terminal
try:
    outcomes = json.load(open(sys.argv[1], encoding="utf-8"))
except ValueError:
    outcomes = []
def text(s):  # a file's name and reason as plain text (lawbench's one rule): no escape reaches the log,
    return terminal(s).replace("\t", "\\t").replace("\n", "\\n")  # one line, tab-separated fields
said = set()
with open(sys.argv[2], "w", encoding="utf-8") as filed, open(sys.argv[3], "w", encoding="utf-8") as refused:
    for o in outcomes:
        if o.get("status") == "refused":
            refused.write(f"{text(o['source'])}\t{text(o['message'])}\n")
            said.add(os.path.normpath(o["source"]))
        elif o.get("binding"):  # the import's own line of a bound runner's record (its filing has none)
            filed.write(f"{o['run_id']}\t{text(o['source'])}\t{text(o.get('interrupted') or '')}\n")
            said.add(os.path.normpath(o["source"]))
neither, passed = [], []
for folder, dirs, files in os.walk(sys.argv[6]) if os.path.isdir(sys.argv[6]) else ():
    for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]):
        path = os.path.normpath(os.path.join(folder, name))
        if name == "run.json":
            if path not in said:
                neither.append(text(path))
        elif name != "binding.json" and not name.endswith(".fetch.json"):  # a record's own sidecars
            passed.append(text(path))
open(sys.argv[4], "w", encoding="utf-8").write("".join(f"{p}\n" for p in sorted(neither)))
open(sys.argv[5], "w", encoding="utf-8").write("".join(f"{p}\n" for p in sorted(passed)))
# the job page's lines: a stranger's file name as a code span (no image, link or HTML)
with open(sys.argv[7], "w", encoding="utf-8") as md:
    for o in outcomes:
        if o.get("status") == "refused":
            md.write(f"- **refused and quarantined:** {markdown_code(o['source'])}\n")
    for p in sorted(neither):
        md.write(f"- **neither filed nor refused:** {markdown_code(p)}\n")
EOF
records=() files=() refused=()
interrupted=()
while IFS=$'\t' read -r run_id record stopped; do
  records+=("$run_id")
  files+=("$record")
  if [ -n "$stopped" ]; then  # a night killed at its timeout: kept and shown, never a baseline (gate.accepted)
    interrupted+=("$run_id")
    echo "nightly_collect: filed $run_id ($record): INTERRUPTED by $stopped, never a baseline"
  else
    echo "nightly_collect: filed $run_id ($record)"
  fi
done < "$work/filed.txt"
while IFS=$'\t' read -r record reason; do
  refused+=("$record")
  echo "nightly_collect: REFUSED $record (quarantined; the other records are still filed): $reason"
done < "$work/refused.txt"
mapfile -t neither < "$work/neither.txt"
for record in "${neither[@]}"; do
  echo "nightly_collect: NEITHER filed nor refused: $record (the import gave no word on it)" >&2
done
mapfile -t passed < "$work/passed.txt"
[ ${#passed[@]} -eq 0 ] ||
  echo "nightly_collect: passed over (not a run.json, never read as a record): ${passed[*]}"

# 3. Drift (a warning, never a failure) and the report: the history page and one page per run.
lawbench history drift --db "$db" | tee "$work/drift.txt"
lawbench report --history --db "$db" --out "$site/index.html"
for run_id in "${records[@]}"; do
  lawbench report --run "$run_id" --db "$db" --out "$site/runs/$run_id.html"
done
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  { echo "### lawbench nightly: ${#records[@]} run record(s) filed (${#interrupted[@]} interrupted), ${#refused[@]} refused"; echo;
    cat "$work/summary-files.md"; echo;
    if [ ${#files[@]} -gt 0 ]; then lawbench baseline show "${files[@]}"; fi; echo;
    echo '```'; lawbench history --db "$db" --limit 10; echo '```'; echo; echo "#### drift"; echo; echo '```';
    cat "$work/drift.txt"; echo '```'; } >> "$GITHUB_STEP_SUMMARY"
fi
if [ "$failed" -ne 0 ]; then exit 1; fi
if [ ${#neither[@]} -gt 0 ]; then
  echo "nightly_collect: ${#neither[@]} run.json file(s) neither filed nor refused: ${neither[*]}" >&2
  exit 3
fi
if [ ${#refused[@]} -gt 0 ]; then
  echo "nightly_collect: ${#refused[@]} record(s) refused: ${refused[*]}" >&2
  exit 3
fi
