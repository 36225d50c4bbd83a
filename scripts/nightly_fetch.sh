#!/usr/bin/env bash
# The collect job's input: every lawbench-* artifact of the nightly's *scheduled* runs started in
# the last HOURS, including those of jobs that finished while their run still waits for another
# box's runner — so an offline runner delays no other profile's history. A dispatched ref's runs
# (event workflow_dispatch) are never listed: they measure, they are never filed.
#
#   scripts/nightly_fetch.sh REPO DEST [HOURS]        (GH_TOKEN in the environment, actions: read)
#
# Each artifact's zip must hash to the sha256 digest GitHub recorded when the job uploaded it; one
# that does not (or has no digest) is not extracted. Beside each extracted folder DEST/<name>/ goes
# DEST/<name>.fetch.json: the workflow run id, its commit and creation time, the artifact's name,
# id and digest, and the zip's sha256 — what GitHub says, written after the extraction and outside
# the folder, so nothing inside an artifact can supply it. `lawbench history import
# --require-binding` holds each record's binding against it (lawbench.core.history.binding).
set -uo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 REPO DEST [HOURS]" >&2; exit 2; fi
repo=$1 dest=$2 hours=${3:-48}
since=$(date -u -d "-$hours hours" +%Y-%m-%dT%H:%M:%SZ)
mkdir -p "$dest"
if ! runs=$(gh api "repos/$repo/actions/workflows/nightly.yml/runs?event=schedule&created=>=$since&per_page=100" \
              --jq '.workflow_runs[] | "\(.id) \(.head_sha) \(.created_at)"'); then
  echo "nightly_fetch: cannot list the nightly's runs; nothing fetched" >&2
  exit 0
fi
while read -r id head created; do
  [[ $id =~ ^[0-9]+$ && $head =~ ^[0-9a-f]{40}$ && $created =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$ ]] || continue
  gh api "repos/$repo/actions/runs/$id/artifacts?per_page=100" \
     --jq '.artifacts[] | select(.expired | not) | select(.name | startswith("lawbench-")) | "\(.id) \(.name) \(.digest // "none")"' |
  while read -r aid name digest; do
    [[ $aid =~ ^[0-9]+$ && $name =~ ^[A-Za-z0-9._-]+$ ]] || continue
    zip="$dest/$name.zip"
    if ! gh api "repos/$repo/actions/artifacts/$aid/zip" > "$zip"; then
      echo "nightly_fetch: could not fetch $name (run $id); the next collect tries again" >&2
      rm -f "$zip"
      continue
    fi
    sha=$(sha256sum "$zip" | cut -d' ' -f1)
    if [ "$digest" != "sha256:$sha" ]; then
      echo "nightly_fetch: $name (run $id) is not extracted: its zip hashes to sha256:$sha, GitHub recorded $digest" >&2
      rm -f "$zip"
      continue
    fi
    rm -rf "${dest:?}/$name" "$dest/$name.fetch.json"
    if unzip -q -o "$zip" -d "$dest/$name"; then
      printf '{"workflow_run_id": "%s", "head_sha": "%s", "run_created_at": "%s", "artifact_id": "%s", "artifact_name": "%s", "artifact_digest": "%s", "zip_sha256": "%s"}\n' \
        "$id" "$head" "$created" "$aid" "$name" "$digest" "$sha" > "$dest/$name.fetch.json"
      echo "nightly_fetch: $name (run $id, $digest)"
    else
      echo "nightly_fetch: could not unzip $name (run $id); the next collect tries again" >&2
      rm -rf "${dest:?}/$name"
    fi
    rm -f "$zip"
  done
done <<< "$runs"
exit 0
