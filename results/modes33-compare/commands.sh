#!/usr/bin/env bash
# The same fixed selection of real commands, run once with main's code (f8b2396) and once with
# h/modes33, into ONE history: LAWBENCH=<that checkout's venv>/bin/lawbench OUT=<shared folder> TAG=before|after
set -u
: "${LAWBENCH:?}" "${OUT:?}" "${TAG:?}"
mkdir -p "$OUT/$TAG"
unset GITHUB_STEP_SUMMARY
LOCK=${LAWBENCH_CACHE:-$HOME/.cache/lawbench}/locks/lawbench.lock
wait_for_box() {  # another engineer's job may hold the box lock: wait for it, never fail on it
  until flock -n "$LOCK" true; do sleep 5; done
}
step() {  # name, then the command's arguments; keeps each run.json (and the mode's own view)
  local name=$1; shift
  [ "$name" = predictions ] || wait_for_box  # predictions run no engine
  "$LAWBENCH" "$@" --out "$OUT" >"$OUT/$TAG/$name.stdout" 2>"$OUT/$TAG/$name.stderr"
  echo "$TAG $name exit $?"
  cp "$OUT/run.json" "$OUT/$TAG/$name.run.json"
  for view in ab.json planted.json junit.xml; do [ -f "$OUT/$view" ] && cp "$OUT/$view" "$OUT/$TAG/$name.$view" && rm -f "$OUT/$view"; done
}
step predictions run --profile cpu -k prediction
step census      run --profile cpu -k census.q4_0-repack
step ab          ab --b llama.cpp@11434.0.0 -k "l15 and syn-25m-q4_0" --pairs 3
step plant       census plant --profile cpu --anchor law4.cpu.census.q4_0-repack
