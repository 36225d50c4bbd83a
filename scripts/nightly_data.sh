#!/usr/bin/env bash
# A copy of the data branch `lawbench-history`, and what the fetch proved: a runner job's read-only
# copy (what each profile is judged against; scripts/nightly_runner.sh passes the proof on), and
# the collect job's checkout that it files tonight's records into (it stops on a failed fetch,
# rather than starting the branch afresh and rebuilding the history from tonight alone).
#
#   scripts/nightly_data.sh REPO DATA        (GH_TOKEN in the environment: contents: read)
#
# REPO  owner/name on GitHub, or any git remote (a path, a URL: the tests use a local bare repository)
# DATA  the folder to check the branch out into (made afresh)
#
# Beside DATA goes DATA.fetch, one line, written by this script after the fetch, outside the
# checkout so nothing on the branch can supply it:
#   fetched <commit>   the branch was fetched and checked out (as local branch lawbench-history)
#   no-branch          the remote answered and has no lawbench-history branch: nothing filed yet
#                      (DATA is an empty orphan branch lawbench-history)
#   failed <why>       the remote could not be asked or the branch could not be fetched
# Only the first two prove anything: a profile with no runs/<profile>/ after them has its first
# night (`lawbench run --first-night`); after a failure its baseline cannot be read, and the gate
# says "cannot judge" (red) rather than starting a baseline from nothing (issue 30, item 6).
set -uo pipefail
if [ $# -ne 2 ]; then echo "usage: $0 REPO DATA" >&2; exit 2; fi
repo=$1 data=${2%/}
state="$data.fetch"
rm -rf "${data:?}" "$state"
if [[ $repo =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]]; then remote="https://github.com/$repo.git"; else remote=$repo; fi
git init -q "$data" || { echo "failed cannot make $data" > "$state"; exit 0; }
state="$(cd "$(dirname "$data")" && pwd)/$(basename "$data").fetch"  # absolute: the steps below run inside DATA
cd "$data" || exit 0
git remote add origin "$remote"
if [ -n "${GH_TOKEN:-}" ]; then
  # the token goes through the environment (GIT_CONFIG_*), never the command line
  auth=$(printf 'x-access-token:%s' "$GH_TOKEN" | base64 -w0)
  export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=http.extraheader GIT_CONFIG_VALUE_0="AUTHORIZATION: basic $auth"
fi
said() { echo "$1" > "$state"; echo "nightly_data: $1"; }
# ls-remote --exit-code: 0 the branch is there, 2 the remote answered without it, anything else failed
err=$(git ls-remote --exit-code origin refs/heads/lawbench-history 2>&1 >/dev/null)
rc=$?
if [ $rc -eq 2 ]; then
  git checkout -q --orphan lawbench-history  # the collect job's first commit starts the branch here
  said "no-branch"
  exit 0
fi
if [ $rc -ne 0 ]; then
  said "failed cannot ask $remote for lawbench-history (git ls-remote exit $rc: $(echo "$err" | tr -s '\n' ' ' | cut -c1-200))"
  exit 0
fi
if ! err=$(git fetch -q --depth=1 origin lawbench-history 2>&1) || ! git checkout -q -b lawbench-history FETCH_HEAD 2>/dev/null; then
  said "failed cannot fetch lawbench-history from $remote ($(echo "$err" | tr -s '\n' ' ' | cut -c1-200))"
  exit 0
fi
said "fetched $(git rev-parse HEAD)"
exit 0
