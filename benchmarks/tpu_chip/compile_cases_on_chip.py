"""Run the PAL4xx fixtures (tests/compile/fixtures) on a real TPU.

    python3 compile_cases_on_chip.py OUT_FILE [--only MODULE[.CASE],...]

Each `bug_*` case is a kernel that TPU interpret mode runs and the TPU
compiler refuses (deviceless, with libtpu); each `ok_*` case is its fixed
twin. Here they run on the chip itself, one by one in this process, and one
JSON line per case goes to OUT_FILE: `status` (ok / error), the error's type
and its whole message (the compile-run mapping reads the message, and the
recording is replayed through it by tests/compile/test_chip_compile_record.py).
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "compile" / "fixtures"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", default="")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(FIXTURES))
    import jax

    run_all = importlib.import_module("run_all")
    only = tuple(x for x in args.only.split(",") if x)
    with args.out.open("a") as out:
        for name in run_all.MODULES:
            mod = importlib.import_module(name)
            for case in sorted(n for n in dir(mod) if n.startswith(("bug_", "ok_"))):
                full = f"{name}.{case}"
                if only and not full.startswith(only):
                    continue
                start = time.monotonic()
                try:
                    jax.block_until_ready(getattr(mod, case)())
                    status, etype, message = "ok", "", ""
                except Exception as e:  # every outcome is data here
                    status, etype, message = "error", type(e).__name__, str(e)
                rec = {"case": full, "status": status, "type": etype,
                       "message": message[:6000], "device": str(jax.devices()[0].device_kind),
                       "seconds": round(time.monotonic() - start, 1)}
                out.write(json.dumps(rec) + "\n")
                out.flush()
                print(full, status, etype, message.splitlines()[0][:140] if message else "",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
