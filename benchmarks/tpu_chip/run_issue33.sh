#!/usr/bin/env bash
# On the TPU machine (the device tool), issue 33's classes in
# test_issue33.py: a hang (a wait with no start), a window past the end, a
# DMA between windows of different shapes, a vector load from an ANY Ref, an
# accumulating DMA. One invocation, under 8 minutes (each step has its own
# time limit: 7.5 minutes if every step ran to its limit); six files come back under
# $OUT (the device tool returns at most 8). They go to tests/runs/data/chip_v5e/,
# where tests/runs/test_chip_replay.py replays them:
#   report_issue33.json       the child's own report on the chip (PALLAS_LSP_INTERPRET=0)
#                             for every test but the hang: exceptions, frames, kernels
#   report_issue33_hang.json  the same for the hang (the child's watchdog after 30 s)
#   run_issue33_tpu.json      `pallas-lsp run --mode tpu --output-format json`: what a user sees
#   run_issue33_hang.json     the same for the hang (--timeout 30)
#   run_issue33_default.json  the default run there (interpret mode, compiled for v5e and v6e)
#   log.txt                   jax.devices(), each step's exit code, time and output
#   device run, carry .whl-tpu:  bash benchmarks/tpu_chip/run_issue33.sh
set -u
. benchmarks/tpu_chip/_install.sh
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/log.txt"; T0=$(date +%s)
# step NAME LIMIT_S STDOUT_FILE COMMAND...: stdout to the file (or the log), stderr to the log
step() {
  local name=$1 limit=$2 out=$3; shift 3
  echo "==== $name: $*" >>"$LOG"
  if [ "$out" = - ]; then timeout "$limit" "$@" >>"$LOG" 2>&1; else timeout "$limit" "$@" >"$out" 2>>"$LOG"; fi
  echo "==== $name: exit $? after $(( $(date +%s) - T0 )) s" >>"$LOG"
  sleep 3  # one program holds the chip at a time
}
HANG="test_issue33.py::test_hang_wait_without_start"
step devices 45 - python3 -c 'import jax; print(jax.devices())'
step report 90 - env PALLAS_LSP_INTERPRET=0 PALLAS_LSP_TIMEOUT=60 \
  PALLAS_LSP_REPORT="$OUT/report_issue33.json" python3 -m pallas_lsp.runs.launcher --pytest -q \
  -p no:cacheprovider test_issue33.py -k "not hang"
step report_hang 50 - env PALLAS_LSP_INTERPRET=0 PALLAS_LSP_TIMEOUT=30 \
  PALLAS_LSP_REPORT="$OUT/report_issue33_hang.json" python3 -m pallas_lsp.runs.launcher --pytest \
  -q -p no:cacheprovider "$HANG"
step run_tpu 90 "$OUT/run_issue33_tpu.json" python3 -m pallas_lsp run --mode tpu \
  --output-format json test_issue33.py -- -k "not hang"
step run_hang 70 "$OUT/run_issue33_hang.json" python3 -m pallas_lsp run --mode tpu --timeout 30 \
  --output-format json "$HANG"
step run_default 90 "$OUT/run_issue33_default.json" python3 -m pallas_lsp run \
  --output-format json test_issue33.py -- -k "not hang"
