#!/usr/bin/env bash
# On the TPU machine (the device tool): the three kernels that TPU interpret
# mode passes and a TPU refuses, run for real with `pallas-lsp run --mode tpu`,
# plus the raw pytest output of each. What comes back under $OUT is recorded
# in tests/runs/data/ and replayed by tests/runs/test_chip_replay.py.
#   device run, carry .whl-tpu:  bash benchmarks/tpu_chip/run_on_chip.sh
set -u
. benchmarks/tpu_chip/_install.sh
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -c 'import jax; print(jax.devices())' >"$OUT/devices.txt" 2>&1
for t in test_block_not_tiled test_sort_in_kernel test_big_blocks; do
  python3 -m pytest -q -p no:cacheprovider "test_three_refused.py::$t" >"$OUT/raw_$t.txt" 2>&1
  sleep 3
done
python3 -m pallas_lsp run --mode tpu --output-format json test_three_refused.py \
  >"$OUT/run_tpu.json" 2>"$OUT/run_tpu.err"
echo "exit $?" >>"$OUT/run_tpu.err"
