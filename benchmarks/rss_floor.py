"""Where the language server's resident memory goes before it reads a file:
RSS after each import stage, in a fresh interpreter per run.

    python benchmarks/rss_floor.py [--repeat 3]

The LSP stack (lsprotocol's ~1,000 attrs classes, then pygls) is most of it:
a floor below which no pygls server on this Python can go. Not a test:
numbers depend on the machine and the Python build (Linux: reads /proc)."""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

STAGES = [
    ("python alone", ""),
    ("+ lsprotocol.types", "import lsprotocol.types"),
    ("+ cattrs", "import cattrs"),
    ("+ pygls server", "import pygls.lsp.server"),
    ("+ engine (analyze)", "import pallas_lsp.engine.analyze"),
    ("+ pallas-lsp server", "import pallas_lsp.lsp.server"),
]

PROBE = """
import json
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
out = []
{body}
print(json.dumps(out))
"""


def one_run() -> list[float]:
    body = "\n".join(f"{stmt}\nout.append(rss())" for _, stmt in STAGES)
    proc = subprocess.run([sys.executable, "-c", PROBE.format(body=body)],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs = [one_run() for _ in range(args.repeat)]
    print("| stage | RSS MiB (median) | added |")
    print("|---|---|---|")
    prev = 0.0
    for i, (name, _) in enumerate(STAGES):
        v = statistics.median(r[i] for r in runs)
        print(f"| {name} | {v:.1f} | {v - prev:+.1f} |")
        prev = v


if __name__ == "__main__":
    main()
