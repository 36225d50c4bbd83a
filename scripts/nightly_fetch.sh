#!/usr/bin/env bash
# The collect job's input: every lawbench-* artifact of the nightly's *scheduled* runs started in
# the last HOURS, including those of jobs that finished while their run still waits for another
# box's runner — so an offline runner delays no other profile's history. A dispatched ref's runs
# (event workflow_dispatch) are never listed: they measure, they are never filed.
#
#   scripts/nightly_fetch.sh REPO DEST [HOURS]        (GH_TOKEN in the environment, actions: read)
set -uo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 REPO DEST [HOURS]" >&2; exit 2; fi
repo=$1 dest=$2 hours=${3:-48}
since=$(date -u -d "-$hours hours" +%Y-%m-%dT%H:%M:%SZ)
mkdir -p "$dest"
if ! ids=$(gh api "repos/$repo/actions/workflows/nightly.yml/runs?event=schedule&created=>=$since&per_page=100" \
             --jq '.workflow_runs[].id'); then
  echo "nightly_fetch: cannot list the nightly's runs; nothing fetched" >&2
  exit 0
fi
for id in $ids; do
  gh api "repos/$repo/actions/runs/$id/artifacts?per_page=100" \
     --jq '.artifacts[] | select(.expired | not) | select(.name | startswith("lawbench-")) | "\(.id) \(.name)"' |
  while read -r aid name; do
    [[ $aid =~ ^[0-9]+$ && $name =~ ^[A-Za-z0-9._-]+$ ]] || continue
    if gh api "repos/$repo/actions/artifacts/$aid/zip" > "$dest/$name.zip" && unzip -q -o "$dest/$name.zip" -d "$dest/$name"; then
      echo "nightly_fetch: $name (run $id)"
    else
      echo "nightly_fetch: could not fetch $name (run $id); the next collect tries again" >&2
    fi
    rm -f "$dest/$name.zip"
  done
done
exit 0
