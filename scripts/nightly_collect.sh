#!/usr/bin/env bash
# The nightly's collecting step: carry the history forward from one night to the next.
#
#   scripts/nightly_collect.sh DATA TONIGHT SITE
#
# DATA     a checkout of the data branch `lawbench-history`: runs/<profile>/<run_id>.json holds
#          every run record ever (text, append-only; a record already there is never rewritten)
# TONIGHT  tonight's downloaded artifacts (any folders holding run.json files)
# SITE     where the pages go: index.html (the history report) and runs/<run_id>.html
#
# Tonight's records are validated by importing them first; only then are they filed on the data
# branch. The history is rebuilt from the whole branch every night (the import is idempotent), so
# the SQLite file is never a second source of truth. Exit non-zero when a record is refused.
set -euo pipefail
if [ $# -ne 3 ]; then echo "usage: $0 DATA TONIGHT SITE" >&2; exit 2; fi
data=$1 tonight=$2 site=$3
if [ ! -d "$tonight" ]; then echo "nightly_collect: no folder $tonight (tonight's artifacts)" >&2; exit 2; fi
mkdir -p "$data/runs" "$site/runs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db="$work/history.sqlite"

# 1. Every earlier night (none on the first: the import then only creates the history), then
#    tonight: a refused record stops the job, naming the file.
lawbench history import --db "$db" "$data/runs"
mapfile -t records < <(find "$tonight" -name run.json -type f | sort)
[ ${#records[@]} -gt 0 ] || echo "nightly_collect: no run.json under $tonight: no runner job left a record tonight"
if [ ${#records[@]} -gt 0 ]; then
  lawbench history import --db "$db" "${records[@]}"
fi

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
  { echo "### lawbench nightly: ${#records[@]} run record(s) tonight"; echo; echo '```';
    lawbench history --db "$db" --limit 10; echo '```'; echo; echo "#### drift"; echo; echo '```';
    cat "$work/drift.txt"; echo '```'; } >> "$GITHUB_STEP_SUMMARY"
fi
