#!/usr/bin/env bash
# A runner job of the nightly (and of the weekly): every profile of one box, one after the other,
# each judged against its own runner's last accepted night.
#
#   scripts/nightly_runner.sh PLAN DATA OUT [RUN ARGS…]
#
# PLAN  "profile:cadence:deadline-minutes …": the job's `plan` from `lawbench profiles runners`
# DATA  a read-only checkout of the data branch `lawbench-history` (scripts/nightly_data.sh);
#       runs/<profile>/ is what each profile is judged against (`--gate baseline`). DATA.fetch
#       says what the fetch proved: only after "fetched" or "no-branch" is a profile without
#       runs/<profile>/ on its first night (`--first-night`); otherwise (a failed fetch, no
#       DATA.fetch) its baseline cannot be read and the gate says "cannot judge" (red)
# OUT   each profile's outputs go to OUT/<profile>/: run.json, junit.xml, report.html, bundle.json
# RUN ARGS  passed to every `lawbench run` (tests use -k and --llama-dir)
#
# Each profile runs through nox's anchors session (NOX, default `nox`), as a developer would.
# `--deadline` is the profile's window: a run near it stops taking anchors and records which it
# did not reach, instead of the job being killed with no record. One profile's failure never
# stops the next; the exit status is the worst of them. The box lock (lawbench.core.lock) and the
# job's concurrency group keep any other job from measuring beside this one.
#
# Inside the nightly's job (GITHUB_RUN_ID set) each profile's record gets OUT/<profile>/binding.json:
# the workflow run, attempt, job, box (LAWBENCH_BOX), commit, profile, and the record's run id and
# sha256. The collect step holds it against what GitHub says about the artifact
# (lawbench.core.history.binding); a record without a binding that verifies never speaks for a runner.
#
# A job killed at its timeout (or cancelled) gets SIGTERM / SIGINT on its whole process group:
# lawbench writes an interrupted record and exits 143 / 130; the trap below keeps this script alive
# until then (bash runs it once the foreground nox has returned), so the record is still bound and
# collect files it — as interrupted, which the gate never takes as a baseline. No later profile runs.
set -uo pipefail
if [ $# -lt 3 ]; then echo "usage: $0 PLAN DATA OUT [RUN ARGS…]" >&2; exit 2; fi
plan=$1 data=${2%/} out=$3
shift 3
nox=${NOX:-nox}
worst=0
stopped=""
fetch=$(head -n1 "$data.fetch" 2>/dev/null | cut -c1-300)
case ${fetch%% *} in
  fetched|no-branch) proven=yes ;;
  *) proven=""; echo "nightly_runner: the data branch was not fetched (${fetch:-no $data.fetch}): a profile without runs there cannot be judged tonight" >&2 ;;
esac
trap 'stopped=SIGTERM' TERM
trap 'stopped=SIGINT' INT
bind() {
  [ -n "${GITHUB_RUN_ID:-}" ] && [ -f "$1/run.json" ] || return 0
  python3 - "$1" "$2" <<'EOF_BIND' || echo "nightly_runner: could not write $1/binding.json: the collect step will not file this record" >&2
import hashlib, json, os, sys
folder, profile = sys.argv[1:3]
raw = open(os.path.join(folder, "run.json"), "rb").read()
env = os.environ.get
binding = {"binding_version": 1, "workflow_run_id": env("GITHUB_RUN_ID"), "run_attempt": int(env("GITHUB_RUN_ATTEMPT") or 1),
           "job": env("GITHUB_JOB"), "box": env("LAWBENCH_BOX"), "head_sha": env("GITHUB_SHA"),
           "repository": env("GITHUB_REPOSITORY"), "profile": profile,
           "record_run_id": json.loads(raw).get("run_id"), "record_sha256": hashlib.sha256(raw).hexdigest()}
with open(os.path.join(folder, "binding.json"), "w", encoding="utf-8") as fh:
    json.dump(binding, fh, indent=2)
EOF_BIND
}
for entry in $plan; do
  IFS=: read -r profile cadence deadline <<< "$entry"
  if ! [[ $profile =~ ^[a-z0-9][a-z0-9._-]*$ && $cadence =~ ^(quick|nightly|weekly|full)$ && $deadline =~ ^[0-9]+$ ]]; then
    echo "nightly_runner: bad plan entry '$entry' (profile:cadence:minutes)" >&2
    worst=2
    continue
  fi
  base="$data/runs/$profile"
  first=()
  if [ ! -e "$base" ] && [ -n "$proven" ]; then
    first=(--first-night)  # the fetch proved it: no run of this profile was ever filed
    echo "nightly_runner: $profile has no runs/$profile/ on the data branch ($fetch): its first night"
  fi
  echo "::group::$profile ($cadence, deadline $deadline min)"
  "$nox" -s anchors -- --profile "$profile" --strict --cadence "$cadence" --gate baseline --baseline "$base" \
    ${first[@]+"${first[@]}"} --deadline "$deadline" --out "$out/$profile" --contribute "$out/$profile/bundle.json" "$@"
  rc=$?
  bind "$out/$profile" "$profile"
  echo "::endgroup::"
  echo "nightly_runner: $profile exit $rc"
  if [ "$rc" -gt "$worst" ]; then worst=$rc; fi
  if [ -n "$stopped" ]; then
    echo "nightly_runner: stopped by $stopped after $profile; its record is bound, no later profile runs" >&2
    [ "$stopped" = SIGINT ] && exit 130
    exit 143
  fi
done
exit "$worst"
