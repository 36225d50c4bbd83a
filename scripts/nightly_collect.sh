#!/usr/bin/env bash
# The nightly's collecting step: carry the history forward from one night to the next.
#
#   scripts/nightly_collect.sh DATA TONIGHT SITE [QUARANTINE]
#
# DATA       a checkout of the data branch `lawbench-history`: runs/<profile>/<run_id>.json holds
#            every run record ever (text, append-only; a record already there is never rewritten)
# TONIGHT    the runner jobs' downloaded artifacts (any folders holding run.json files); a missing
#            folder is a night with no artifacts (download-artifact makes none), not an error
# SITE       where the pages go: index.html (the history report) and runs/<run_id>.html
# QUARANTINE where a refused record is copied (named on stdout and in the step summary)
#
# Each record is validated by importing it on its own: a refused one is quarantined and named,
# and every other record is still filed, reported and pushed. The history is rebuilt from the
# whole branch every night (the import is idempotent), so the SQLite file is never a second source
# of truth. Exit 0, or 3 when a record was refused (after everything else was done).
set -euo pipefail
if [ $# -lt 3 ] || [ $# -gt 4 ]; then echo "usage: $0 DATA TONIGHT SITE [QUARANTINE]" >&2; exit 2; fi
data=$1 tonight=$2 site=$3 quarantine=${4:-}
mkdir -p "$data/runs" "$site/runs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db="$work/history.sqlite"

# 1. Every earlier night (none on the first: the import then only creates the history), then
#    tonight's records one by one: a refused record is set aside, the others go on.
set +e
lawbench history import --db "$db" "$data/runs"
earlier=$?
set -e
if [ "$earlier" -ne 0 ]; then
  echo "nightly_collect: warning: some records already on the data branch were refused (above); the others are in the history"
fi
# Contributions a maintainer filed (docs/history.md): shown as such, never a runner's state.
if [ -d "$data/contributions" ]; then
  lawbench history import --db "$db" --contribution "$data/contributions" ||
    echo "nightly_collect: warning: some filed contributions were refused (above)"
fi
records=() refused=()
if [ -d "$tonight" ]; then
  mapfile -t found < <(find "$tonight" -name run.json -type f | sort)
else
  found=()
  echo "nightly_collect: no folder $tonight: no runner job left an artifact tonight"
fi
[ ${#found[@]} -gt 0 ] || echo "nightly_collect: no run.json under $tonight: no runner job left a record tonight"
for record in "${found[@]}"; do
  if lawbench history import --db "$db" "$record"; then
    records+=("$record")
  else
    refused+=("$record")
    echo "nightly_collect: REFUSED $record (quarantined; the other records are still filed)"
    if [ -n "$quarantine" ]; then
      mkdir -p "$quarantine"
      cp "$record" "$quarantine/$(printf '%s' "$record" | tr -c 'A-Za-z0-9._-' '_')"
    fi
  fi
done

# 2. File tonight's records on the data branch under their profile and run id.
for record in "${records[@]}"; do
  dest=$(python3 - "$record" "$data/runs" <<'EOF'
import json, re, sys
rec = json.load(open(sys.argv[1], encoding="utf-8"))
safe = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
profile, run_id = rec.get("profile", ""), rec.get("run_id", "")
if not (safe.match(profile) and safe.match(run_id)):
    sys.exit(f"{sys.argv[1]}: profile {profile!r} / run_id {run_id!r} cannot name a file")
print(f"{sys.argv[2]}/{profile}/{run_id}.json")
EOF
)
  if [ ! -e "$dest" ]; then
    mkdir -p "$(dirname "$dest")"
    cp "$record" "$dest"
    echo "filed $dest"
  fi
done

# 3. Drift (a warning, never a failure) and the report: the history page and one page per run.
lawbench history drift --db "$db" | tee "$work/drift.txt"
lawbench report --history --db "$db" --out "$site/index.html"
for record in "${records[@]}"; do
  run_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$record")
  lawbench report "$record" --out "$site/runs/$run_id.html"
done
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  { echo "### lawbench nightly: ${#records[@]} run record(s) filed, ${#refused[@]} refused"; echo;
    for r in "${refused[@]}"; do echo "- **refused and quarantined:** \`$r\`"; done; echo;
    if [ ${#records[@]} -gt 0 ]; then lawbench baseline show "${records[@]}"; fi; echo;
    echo '```'; lawbench history --db "$db" --limit 10; echo '```'; echo; echo "#### drift"; echo; echo '```';
    cat "$work/drift.txt"; echo '```'; } >> "$GITHUB_STEP_SUMMARY"
fi
if [ ${#refused[@]} -gt 0 ]; then
  echo "nightly_collect: ${#refused[@]} record(s) refused: ${refused[*]}" >&2
  exit 3
fi
