"""What a TPU v5e chip did with the PAL4xx fixtures, as recorded.

`benchmarks/tpu_chip/compile_cases_on_chip.py` ran every `bug_*` and `ok_*`
case of tests/compile/fixtures on a real chip, not interpreted and not
deviceless (2026-12-06, jax 0.10.2): data/chip_v5e_compile.jsonl. The
deviceless compile of the suite predicts each refusal; here the chip's own
messages go through the compile-run mapping and must name the same code, and
every fixed twin must have run. No TPU is needed to replay them.
"""
import json
from pathlib import Path

import pytest

from pallas_lsp.runs.compile_mapping import HINTS, _code_of, kind_of

HERE = Path(__file__).parent
ROWS = {r["case"]: r for r in map(json.loads,
                                  (HERE / "data" / "chip_v5e_compile.jsonl").read_text().splitlines())}
# The cases of pal4_compile_codes, each for its own rule.
MIXED = {"bug_float16_scratch_store": "PAL405", "bug_int8_block_rows": "PAL401",
         "bug_uint8_floordiv": "PAL403"}


def _expected(case: str) -> str:
    module, name = case.split(".")
    return MIXED[name] if module == "pal4_compile_codes" else module[:6].upper()


def test_the_record_covers_every_case_of_the_fixtures():
    import importlib
    import sys
    sys.path.insert(0, str(HERE / "fixtures"))
    run_all = importlib.import_module("run_all")
    cases = {f"{m}.{n}" for m in run_all.MODULES
             for n in dir(importlib.import_module(m)) if n.startswith(("bug_", "ok_"))}
    assert cases == set(ROWS)
    assert {r["device"] for r in ROWS.values()} == {"TPU v5 lite"}


@pytest.mark.parametrize("case", sorted(c for c in ROWS if ".bug_" in c))
def test_the_chip_refuses_every_bug_with_the_rules_code(case):
    r = ROWS[case]
    assert r["status"] == "error", case
    assert _code_of(r["message"]) == _expected(case), (case, r["message"][:200])
    assert kind_of(r["message"]) != "other"  # a specific hint, not the generic one
    assert HINTS[kind_of(r["message"])]


@pytest.mark.parametrize("case", sorted(c for c in ROWS if ".ok_" in c))
def test_the_chip_runs_every_fixed_twin(case):
    assert ROWS[case]["status"] == "ok", (case, ROWS[case]["message"][:200])
