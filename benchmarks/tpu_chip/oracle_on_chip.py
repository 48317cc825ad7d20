"""Run the oracle fixtures (tests/oracle/fixtures) on a real TPU, not interpreted.

    python3 oracle_on_chip.py OUT_FILE [--start N] [--stop M] [--budget S] [--timeout S]

Each fixture is a buggy kernel that JAX rejects in interpret mode, or its
`_fixed` twin. Here the text `interpret=...` is replaced by `interpret=False`
and its `main()` runs, so what the chip does with each rule's bug is
recorded: the error's first line, a hang, or a clean run (a wrong result is
not checked: the fixtures compare nothing). Most run in this one process (the
chip starts once); a fixture that may hang (`HANG_PRONE`) runs first, in a
fresh Python killed after --timeout. Fixtures that simulate several
devices on the CPU (`JAX_PLATFORMS=cpu`) cannot run on one chip and are
recorded as `skipped`. One JSON object per line goes to OUT_FILE;
tests/oracle/test_chip_record.py reads the recording.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2] / "tests"
# oracle/: JAX rejects the bug (trace time); beyond/: JAX accepts it and the
# effect is a hang or a wrong result (each prints `RESULT {json}`).
FIXTURES = (TESTS / "oracle" / "fixtures", TESTS / "beyond" / "fixtures")
# `interpret=pltpu.InterpretParams()`, `interpret=True`, `interpret=pltpu.InterpretParams(x=1)`
_INTERPRET = re.compile(r"interpret\s*=\s*True")
# Any interpret-params object, also one kept in a variable or a dict of modes
# (the beyond fixtures' `modes = {"on_wait": pltpu.InterpretParams(), ...}`).
_PARAMS = re.compile(r"\b(?:pltpu|tpu)\.(?:TPU)?InterpretParams\([^()]*\)")


def on_chip(text: str) -> str:
    return _PARAMS.sub("False", _INTERPRET.sub("interpret=False", text))


def first_error_line(stderr: str) -> str:
    """The exception's own line: the last line that reads `Type: message`."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b", ln):
            return ln[:500]
    return lines[-1][:500] if lines else ""


# A wait nothing signals, a copy never waited, a wait that does not decrement
# (this one hung the chip in-process): each in its own process.
HANG_PRONE = ("pal303", "pal302", "pal207")


def cpu_only(text: str) -> bool:
    return "JAX_PLATFORMS" in text or "host_platform_device_count" in text


def run_here(path: Path, chip: str) -> tuple[str, str, str]:
    """Execute the fixture's text in this process and call its main():
    (status, error line, what it printed)."""
    import contextlib
    import io
    printed = io.StringIO()
    namespace = {"__name__": path.stem, "__file__": str(path)}
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(chip, str(path), "exec"), namespace)
            namespace["main"]()
        return "ok", "", printed.getvalue()
    except Exception as e:  # every outcome is data here
        line = (f"{type(e).__name__}: {e}".splitlines() or [""])[0]
        return "error", line[:500], printed.getvalue()


def result_of(printed: str):
    """A beyond fixture's `RESULT {json}` line (what the kernel computed)."""
    for line in printed.splitlines():
        if line.startswith("RESULT "):
            try:
                return json.loads(line[len("RESULT "):])
            except ValueError:
                return None
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--stop", type=int, default=10_000)
    ap.add_argument("--budget", type=float, default=540, help="seconds for this call")
    ap.add_argument("--timeout", type=float, default=25, help="seconds before a run counts as hung")
    ap.add_argument("--only", default="", help="comma-separated name prefixes (pal207,pal302)")
    args = ap.parse_args(argv)
    files = sorted((p for d in FIXTURES for p in d.glob("*.py") if p.name[:3] in ("pal", "neg")),
                   key=lambda p: (p.parent.parent.name, p.name))[args.start:args.stop]
    indexed = list(enumerate(files, start=args.start))
    if args.only:
        indexed = [(i, p) for i, p in indexed if p.name.startswith(tuple(args.only.split(",")))]
    # The ones that may hang first, each in its own process, before this
    # process takes the chip (it holds it from its first run on); then the rest here.
    order = [x for x in indexed if x[1].name.startswith(HANG_PRONE)] + \
            [x for x in indexed if not x[1].name.startswith(HANG_PRONE)]
    t0 = time.monotonic()
    with args.out.open("a") as out, tempfile.TemporaryDirectory() as tmp:
        for i, path in order:
            if time.monotonic() - t0 > args.budget:
                print(f"budget spent before {path.name}", flush=True)
                break
            text = path.read_text()
            chip = on_chip(text)
            start = time.monotonic()
            printed = ""
            if cpu_only(text):
                status, err = "skipped", "simulates several devices on the CPU"
            elif not path.name.startswith(HANG_PRONE):
                status, err, printed = run_here(path, chip)
            else:
                target = Path(tmp) / path.name
                target.write_text(chip)
                try:
                    p = subprocess.run([sys.executable, str(target)], capture_output=True,
                                       text=True, timeout=args.timeout, cwd=tmp)
                    status = "ok" if p.returncode == 0 else "error"
                    err = first_error_line(p.stderr) if p.returncode else ""
                    printed = p.stdout
                except subprocess.TimeoutExpired:
                    status, err = "hang", ""
                time.sleep(3)  # let the process (killed or not) release the chip
            rec = {"fixture": f"{path.parent.parent.name}/{path.name}", "index": i,
                   "status": status, "error": err, "result": result_of(printed),
                   "seconds": round(time.monotonic() - start, 1),
                   "interpret_replaced": chip != text}
            out.write(json.dumps(rec) + "\n")
            out.flush()
            print(i, path.name, status, err[:120], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
