#!/usr/bin/env bash
# Push the data branch's new run records; when the branch moved meanwhile (another collect, a
# person), fetch, rebase and try again. Records are new files named by run id, so a rebase never
# conflicts with another night's records.
#
#   scripts/nightly_push.sh DATA MESSAGE
#
# DATA is a git checkout of `lawbench-history` whose remote `origin` is the repository; the token
# comes from the environment (GIT_CONFIG_* set by the workflow), never from this script.
set -uo pipefail
if [ $# -ne 2 ]; then echo "usage: $0 DATA MESSAGE" >&2; exit 2; fi
cd "$1" || exit 2
git add runs
if git diff --cached --quiet; then echo "nightly_push: no new run records"; exit 0; fi
# the commit and, after a moved branch, the rebase both write commits under this name
export GIT_AUTHOR_NAME="lawbench nightly" GIT_COMMITTER_NAME="lawbench nightly"
export GIT_AUTHOR_EMAIL="lawbench-nightly@users.noreply.github.com" GIT_COMMITTER_EMAIL="lawbench-nightly@users.noreply.github.com"
git commit -q -m "$2"
for attempt in 1 2 3 4 5; do
  if git push -q origin HEAD:lawbench-history; then
    echo "nightly_push: pushed (attempt $attempt)"
    exit 0
  fi
  echo "nightly_push: push refused (attempt $attempt): the data branch moved; fetching and rebasing"
  if ! git fetch -q origin lawbench-history; then sleep $((attempt * 3)); continue; fi
  if ! git rebase -q FETCH_HEAD; then
    git rebase --abort
    echo "nightly_push: rebase onto the moved branch failed: a record file was changed on the branch" >&2
    exit 1
  fi
done
echo "nightly_push: gave up after 5 attempts" >&2
exit 1
