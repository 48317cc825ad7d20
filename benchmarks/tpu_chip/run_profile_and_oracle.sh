#!/usr/bin/env bash
# On the TPU machine (the device tool), two things in one call:
# 1. the `tpu` profile path end to end: a project whose pyproject.toml has a
#    `kind = "tpu"` profile whose command template runs the remote command on
#    this same machine (`sh -c {command}`, what `gcloud ... ssh --command` does
#    on a TPU VM); `pallas-lsp run --profile chip` copies the project with tar
#    through the template and runs the tests on the chip (text and json);
# 2. the oracle fixtures on the chip (oracle_on_chip.py), from index $START
#    for at most $BUDGET seconds.
#   device run, carry .whl-tpu:  START=0 BUDGET=420 bash benchmarks/tpu_chip/run_profile_and_oracle.sh
# (SKIP_PROFILE=1 for the fixtures alone)
set -u
. benchmarks/tpu_chip/_install.sh
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
START=${START:-0}; BUDGET=${BUDGET:-420}
if [ "${SKIP_PROFILE:-0}" != 1 ]; then
  PROJ=$(mktemp -d); mkdir -p "$PROJ/tests"
  cp "$HERE/test_three_refused.py" "$PROJ/tests/test_refused.py"
  # The remote side starts from a clean environment: name its Python and the
  # PYTHONPATH that holds jax there, as a TPU VM user names their venv.
  cat >"$PROJ/pyproject.toml" <<TOML
[project]
name = "chip-demo"
version = "0"

[tool.pallas-lsp.profiles.chip]
kind = "tpu"
mode = "tpu"
command = ["sh", "-c", "{command}"]
remote_dir = "pallas-runs/chip-demo"
remote_python = "$(command -v python3)"
env = { PYTHONPATH = "$PYTHONPATH" }
timeout = 120
TOML
  (cd "$PROJ" && timeout 200 python3 -m pallas_lsp run --profile chip --allow-project-profiles \
     tests/test_refused.py >"$OUT/profile_run.txt" 2>&1; echo "exit $?" >>"$OUT/profile_run.txt")
  sleep 3
  (cd "$PROJ" && timeout 200 python3 -m pallas_lsp run --profile chip --allow-project-profiles \
     --output-format json tests/test_refused.py >"$OUT/profile_run.json" 2>"$OUT/profile_run.err"
   echo "exit $?" >>"$OUT/profile_run.err")
  sleep 3
fi
python3 "$HERE/oracle_on_chip.py" "$OUT/oracle_chip_$START.jsonl" --start "$START" --budget "$BUDGET" --timeout 20 ${ONLY:+--only "$ONLY"} \
  >"$OUT/oracle_chip_$START.log" 2>&1
