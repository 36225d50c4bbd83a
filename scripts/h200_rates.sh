#!/usr/bin/env bash
# `scripts/h200_run.sh rates` (issue 31): does the nightly gate see a one-format slowdown on this
# runner the first night it happens? Unplanted nights of the profile's rate arms (-k $LB_SELECT) go
# into one history, each judged by the real gate (`lawbench run --gate baseline`), until $LB_NIGHTS
# nights are accepted; then each planted night ($LB_TRIALS: the factor its one format ($LB_FORMAT)
# is reported at, 0.97 = 3 % slower) is judged against a copy of those accepted nights, so a missed
# plant never becomes baseline. A factor of 1.0 is a control: an unplanted night judged like any
# other and added to the history (accepted if green), so the baseline grows as a runner's does and a
# red control is a false alarm. Every night runs through the same planting --llama-dir wrapper
# (tests/standin/planted_llama_bench.py; with nothing planted it passes llama-bench through).
#
# Called by h200_run.sh (installed lawbench on PATH) or, on a CPU box, directly:
#   LB_PROFILE=cpu LB_BIN=<llama.cpp bin> LB_SELECT="agree and syn-25m-q4_0" LB_FORMAT=Q4_0 \
#     OUT=/tmp/x bash scripts/h200_rates.sh
# A second call carries on: on the warm machine from /tmp/lbrates, elsewhere from the history.sqlite
# a first call left (LB_RATES_HISTORY). What is left under $OUT: rates-summary.tsv (one line a night),
# rates-bundle.tgz (every night's run.json and log, the history).
set -uo pipefail
OUT=${OUT:-$PWD/h200-out}; mkdir -p "$OUT"
PROFILE=${LB_PROFILE:-h200}
SEL=${LB_SELECT:-format.q4_0-over-q4_k_m}
FORMAT=${LB_FORMAT:-Q4_K_M}
NIGHTS=${LB_NIGHTS:-8}
TRIALS=${LB_TRIALS:-0.97 0.90 0.97 0.97 0.97 0.90 0.97 0.97 0.97 0.97 0.97}
STOP_AT=$(( $(date +%s) + ${LB_BUDGET_S:-540} ))
WORK=${LB_RATES_DIR:-/tmp/lbrates}; H=$WORK/history; mkdir -p "$H" "$WORK/trials"
export PYTHONUNBUFFERED=1

if [ -n "${LB_BIN:-}" ]; then
  BIN=$LB_BIN
else
  { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; uname -r; } > "$OUT/machine.txt" 2>&1
  GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  if [ -n "${LB_ALLOW_H100:-}" ] && [[ "$GPU" == *H100* ]]; then  # the lender sent an H100: said, and recorded as one
    sed -i 's/gpu_name_contains = "H200"/gpu_name_contains = "H100"/' \
      "$(python3 -P -c 'import lawbench.hardware_profiles as p, os; print(os.path.dirname(p.__file__))')/h200.toml"
    echo "NOTE: $GPU, not an H200: the h200 profile's GPU name relaxed to H100 for this call" | tee -a "$OUT/machine.txt"
  fi
  t0=$(date +%s)
  [ -f /tmp/lbcache/engine.json ] || lawbench engine build llama.cpp --backend cuda --jobs 16 --json > /tmp/lbcache/engine.json 2> "$OUT/engine-build.log"
  echo "engine in $(( $(date +%s) - t0 )) s"
  BIN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bin_dir"])' /tmp/lbcache/engine.json) || exit 1
fi
[ -n "${LB_RATES_HISTORY:-}" ] && [ ! -f "$H/history.sqlite" ] && cp "$LB_RATES_HISTORY" "$H/history.sqlite"
W=$WORK/llama
python3 -P - "$W" "$BIN" <<'PY' || exit 1
import sys
from pathlib import Path
sys.path.insert(0, "tests")
from standin.planted_llama_bench import make_wrapper
make_wrapper(Path(sys.argv[1]), Path(sys.argv[2]))
PY

# One night: planted.json, the run judged against BASELINE (its record and history row go to OUTDIR),
# one summary line from its record.
night() {  # LABEL PLANTED-JSON BASELINE OUTDIR LOG
  echo "$2" > "$W/planted.json"
  local t0=$(date +%s)
  # no history yet: a declared first night (a missing baseline is "cannot judge", red, never accepted)
  local against=(--baseline "$3"); [ "$3" = first-night ] && against=(--first-night)
  lawbench run --profile "$PROFILE" --strict -k "$SEL" --llama-dir "$W" --gate baseline \
    "${against[@]}" --out "$4" > "$5" 2>&1
  local rc=$?
  python3 -P - "$1" "$rc" "$(( $(date +%s) - t0 ))" "$4/run.json" <<'PY' | tee -a "$OUT/rates-summary.tsv"
import json, sys
label, rc, secs, path = sys.argv[1:5]
try:
    rec = json.load(open(path))
except (OSError, ValueError) as exc:
    print(f"{label}\trc={rc}\t{secs}s\tno record: {exc}"); sys.exit()
g = rec.get("gate") or {}
news = [f"{n['kind']} {n['anchor_id']} {n['size']:+.2%} [{n['size_interval'][0]:+.2%}, {n['size_interval'][1]:+.2%}]"
        if n.get("size") is not None else f"{n['kind']} {n['anchor_id']}" for n in g.get("news", [])]
rates = [f"{r['series']['format']} {r['series']['placement']} {r['measured']:.5g}"
         for res in rec["results"] for r in res.get("rates", []) if r.get("measured")]
print("\t".join([label, f"rc={rc}", f"{secs}s", f"gate={g.get('verdict')}", f"accepted_before={g.get('baseline_runs')}",
                 f"unanalysed={len(g.get('rates_unanalysed') or [])}", "; ".join(news) or "no news",
                 "rates: " + "; ".join(rates), rec["run_id"]]))
PY
}

accepted() {
  python3 -P - "$H/history.sqlite" <<'PY'
import sys
from pathlib import Path
from lawbench.core.history.store import History
from lawbench.core.history.gate import accepted
p = Path(sys.argv[1])
if not p.is_file():
    print(0); sys.exit()
with History(p, create=False) as h:
    print(sum(1 for r in h.runs(limit=None) if r.finished and accepted(h.record(r.run_id))))
PY
}

# The in-night A/B's own rule on this machine ($LB_AB_TRIALS: factors): `lawbench ab` of the build
# against itself behind the wrapper with the subject arm's format ($LB_AB_FORMAT) planted slower, gated
# at 0.99 as an engine upgrade night gates (core/run/upgrade.py: up to the h200 profile's upgrade_pairs, 30,
# looks after 4, 7, 10, …; $LB_AB_PAIRS).
# -k ${LB_AB_SELECT:-$LB_SELECT}; LB_AB_FIRST=1 runs them before the nights (a call that may be the only one).
ab_trials() {
local j f rc t0; j=$(ls "$WORK" | grep -c '^ab-.*\.log$')
set -- ${LB_AB_TRIALS:-}; shift "$j" 2>/dev/null || set --
for f in "$@"; do
  [ "$(date +%s)" -lt "$STOP_AT" ] || break
  j=$((j + 1)); echo "{\"slow\": {\"${LB_AB_FORMAT:-Q4_0}\": $f}}" > "$W/planted.json"
  t0=$(date +%s)
  lawbench ab --profile "$PROFILE" -k "${LB_AB_SELECT:-$SEL}" --a "dir:$BIN" --b "dir:$W" --pairs "${LB_AB_PAIRS:-30}" --gate-min-ratio 0.99 \
    --confidence 0.995 --out "$WORK/ab-$j" > "$WORK/ab-$j.log" 2>&1
  rc=$?
  python3 -P - "ab-$j ${LB_AB_FORMAT:-Q4_0} x$f" "$rc" "$(( $(date +%s) - t0 ))" "$WORK/ab-$j/ab.json" <<'PY' | tee -a "$OUT/rates-summary.tsv"
import json, sys
label, rc, secs, path = sys.argv[1:5]
try:
    ab = json.load(open(path))
except (OSError, ValueError) as exc:
    print(f"{label}\trc={rc}\t{secs}s\tno record: {exc}"); sys.exit()
for r in ab["results"]:
    ci = r.get("interval") or [float("nan")] * 2
    print("\t".join([label, f"rc={rc}", f"{secs}s", r["anchor_id"], r.get("test", ""), f"B/A {r.get('ratio') or float('nan'):.4f}",
                     f"[{ci[0]:.4f}, {ci[1]:.4f}]", f"pairs={r.get('pairs')}", f"gate={r.get('gate')}"]))
PY
done
}
[ -n "${LB_AB_FIRST:-}" ] && ab_trials
n=$(ls "$H" | grep -c '^night-.*\.log$')
while [ "$(accepted)" -lt "$NIGHTS" ] && [ "$(date +%s)" -lt "$STOP_AT" ]; do
  n=$((n + 1)); base=$H/history.sqlite
  [ -f "$base" ] && cp "$base" "$WORK/baseline.sqlite" && base=$WORK/baseline.sqlite || base=first-night
  night "night-$n" '{}' "$base" "$H" "$H/night-$n.log"
  cp "$H/run.json" "$H/night-$n.json" 2>/dev/null
done
if [ "$(accepted)" -ge "$NIGHTS" ]; then
  i=$(ls "$WORK/trials" | grep -c '\.log$')
  set -- $TRIALS; shift "$i" 2>/dev/null || set --
  for f in "$@"; do
    [ "$(date +%s)" -lt "$STOP_AT" ] || break
    if [ "$f" = 1.0 ] || [ "$f" = 1 ]; then  # a control is a real night: into the history, accepted if green,
      n=$((n + 1)); cp "$H/history.sqlite" "$WORK/baseline.sqlite"  # as a runner's next night is
      night "night-$n control" '{}' "$WORK/baseline.sqlite" "$H" "$H/night-$n.log"
      cp "$H/run.json" "$H/night-$n.json" 2>/dev/null; touch "$WORK/trials/control-$n.log"; continue
    fi
    i=$((i + 1)); cp "$H/history.sqlite" "$WORK/trials/baseline-$i.sqlite"
    night "trial-$i $FORMAT x$f" "{\"slow\": {\"$FORMAT\": $f}}" "$WORK/trials/baseline-$i.sqlite" \
      "$WORK/trials/trial-$i" "$WORK/trials/trial-$i.log"
    rm -f "$WORK/trials/baseline-$i.sqlite"
  done
fi
[ -z "${LB_AB_FIRST:-}" ] && ab_trials
# LB_NCU=1: Nsight Compute's Warp State counters of llama.cpp's mmq kernels (prefill of the Q4_K_M
# file, whose Q6_K tensors take mmq too), as ncu prints them: real output for lawbench's counter
# reader (issue 34, register r41's L1TEX scoreboard share); ncu-query.txt lists the chip's metric names.
if [ -n "${LB_NCU:-}" ] && command -v ncu > /dev/null; then
  M=$(python3 -P -c 'import sys; from lawbench.core.laws.resources import Resources; r = Resources(llama_dir=sys.argv[1]); print(r.model("syn-3.4b-q4_k_m")); r.close()' "$BIN")
  ncu --version > "$OUT/ncu-query.txt" 2>&1
  ncu --query-metrics 2>&1 | grep -iE "long_scoreboard|per_inst_issued|^Device|warp_latency" >> "$OUT/ncu-query.txt"
  timeout 120 ncu --clock-control none --section WarpStateStats --csv -k regex:mul_mat_q --launch-count 6 \
    "$BIN/llama-bench" -m "$M" -p 512 -n 0 -r 1 -ngl 99 > "$OUT/ncu-warpstate.csv" 2> "$OUT/ncu-warpstate.err"
  echo "ncu section rc=$?"
  timeout 120 ncu --clock-control none --csv --print-units base -k regex:mul_mat_q --launch-count 6 \
    --metrics smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warp_latency_per_inst_issued.ratio \
    "$BIN/llama-bench" -m "$M" -p 512 -n 0 -r 1 -ngl 99 > "$OUT/ncu-metrics.csv" 2>> "$OUT/ncu-warpstate.err"
  echo "ncu metrics rc=$?"; tail -3 "$OUT/ncu-warpstate.err"
fi
echo "accepted nights: $(accepted); stopped at $(date -u +%H:%M:%S)"
(cd "$WORK" && tar czf "$OUT/rates-bundle.tgz" --exclude=baseline.sqlite --exclude='*.gguf' history trials $(ls -d ab-* 2>/dev/null))
