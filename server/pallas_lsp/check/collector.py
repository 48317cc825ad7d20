"""Python's cyclic garbage collector between the command line's analyses.

The engine pauses the collector during an analysis (analyze.py); when it
resumes, its first collection scans everything the analysis left alive,
which in a library is mostly the parsed trees of the modules it imported,
kept in the project's cache for the next files. Each tree was scanned two or
three times that way, generation by generation (6 % of marin_levanter's
check, none of which freed anything: the analyses break their own cycles).

So, for the command line only: the collector stays off between files, and
what a file's analysis left alive is frozen (`gc.freeze`: never scanned
again, still freed by reference counting). What only the collector can
free is collected where it can be large: after an analysis that failed
(its interpreter was not released) and when the project lets go of its
parsed trees (`Project.evictions`; a tree and its nodes point at each other).
"""
from __future__ import annotations

import gc


class Collector:
    """`with Collector(project) as after:` ... `after(analysis)` per file."""

    def __init__(self, project):
        self.project = project
        self.evictions = project.evictions
        self.was_enabled = False

    def __enter__(self):
        self.was_enabled = gc.isenabled()
        gc.disable()
        return self.after

    def after(self, analysis=None) -> None:
        if (analysis is not None and analysis.internal_error) \
                or self.project.evictions != self.evictions:
            self.evictions = self.project.evictions
            gc.unfreeze()
            gc.collect()
        gc.freeze()

    def __exit__(self, *exc) -> None:
        gc.unfreeze()
        if self.was_enabled:
            gc.enable()
