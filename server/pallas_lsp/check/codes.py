"""Every code pallas-lsp can print, and code selectors (`--select PAL1`).

The rules' codes come from the catalog (one TOML per rule, with JAX's text).
The tool's own codes are described here: files that could not be checked
(E001, E902, E999) and what `pallas-lsp run` reports beyond the catalog
(PAL900-PAL903). Each has a page for `pallas-lsp rule CODE`, like the rules.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolCode:
    code: str
    name: str
    summary: str
    what: str
    fix: str
    origin: str  # which command prints it: "check" or "run"

    def to_dict(self) -> dict:
        return {"kind": "tool", **dataclasses.asdict(self)}

    def to_markdown(self) -> str:
        return "\n".join([
            f"# {self.code} ({self.name})", "", self.summary, "",
            f"Printed by: `pallas-lsp {self.origin}`", "",
            "## What it means", "", self.what, "",
            "## What to do", "", self.fix, ""])


TOOL_CODES: dict[str, ToolCode] = {c.code: c for c in (
    ToolCode(
        "E001", "internal-error",
        "pallas-lsp failed on this file: a bug in pallas-lsp, not in your code.",
        "The engine raised an exception while analysing the file. The other files were still "
        "checked; this one has no findings, so a clean result for it means nothing. "
        "`check` exits with 3 (not 1) when it happens.",
        "Report it with the file (or the smallest part of it that still fails) and the "
        "message. Until it is fixed, `exclude` the file.", "check"),
    ToolCode(
        "E902", "file-not-checked",
        "A file that could not be read as Python source (or as a notebook): skipped.",
        "The file is not valid UTF-8, is larger than pallas-lsp analyses, is not a regular "
        "file (a FIFO, a device, a socket), is a broken symbolic link, cannot be read "
        "(permissions), or is a notebook (`.ipynb`) that is not nbformat 4 JSON (invalid "
        "JSON, no `cells` list, a cell without `cell_type` or `source`). The message says "
        "which. Such a notebook is never rewritten by `--fix`.",
        "Re-encode the file as UTF-8, repair the notebook (open and save it in Jupyter), or "
        "`exclude` it (generated files, fixtures).", "check"),
    ToolCode(
        "E999", "syntax-error",
        "The file does not parse; the broken statement is skipped and the rest is checked.",
        "Python's parser rejects the file at the reported line and column. pallas-lsp blanks "
        "the broken line (or the top-level statement around it) and analyses the rest, so "
        "other kernels in the file still get findings; the broken part gets none. Syntax of a "
        "Python newer than the one running pallas-lsp (PEP 695 type parameters) is not an "
        "error. In a notebook a cell that does not parse is repaired or left out on its "
        "own (`cell N` says which) and the other cells are checked and fixed. A docs "
        "page's code block that does not parse (a signature, `def f(...):`) is an "
        "illustration, not an error: it is left out whole (`--verbose` lists it).",
        "Fix the syntax error. `--fix` does not touch a file with a syntax error.", "check"),
    ToolCode(
        "PAL900", "run-failed",
        "A run raised an exception that is not one of the catalog's messages.",
        "`pallas-lsp run` ran the test or script in TPU interpret mode and it raised, for "
        "example an `IndexError` from an out-of-bounds read or a failed `assert`. The "
        "message is `Type: message`, placed on the innermost line of your own code.",
        "Read the exception; the related locations give the call chain (kernel, helper, "
        "test).", "run"),
    ToolCode(
        "PAL901", "data-race",
        "JAX's race detector found two accesses to the same memory that race.",
        "`pallas-lsp run --races` runs interpret mode with race detection; each of the two "
        "racing lines gets this code (a DMA's side is its `.start()` line).",
        "Order the two accesses: wait on the DMA before touching its destination, or use "
        "separate buffers.", "run"),
    ToolCode(
        "PAL902", "run-hung",
        "The run did not finish within its timeout, and the hang is not in a DMA wait.",
        "Interpret mode waits forever where a TPU would hang too, typically a "
        "`pl.semaphore_wait` that never gets enough signals. A hang in a DMA `.wait()` is "
        "reported as PAL303 at that line instead.",
        "Check that every wait has matching signals on every path; raise `--timeout` if the "
        "test is merely slow.", "run"),
    ToolCode(
        "PAL903", "tpu-compile-error",
        "`run --compile`: the TPU compiler rejected a kernel for a reason no PAL4xx rule "
        "names.",
        "The message is the compiler's own text, placed on the `pallas_call` (or the line "
        "the compiler names).",
        "Read the compiler's message; `pallas-lsp rule PAL401` to `PAL407` describe the "
        "reasons pallas-lsp knows.", "run"),
)}


@functools.lru_cache(maxsize=1)
def rule_codes() -> tuple[str, ...]:
    """The codes of the catalog (every rule, and PAL107)."""
    from pallas_lsp import catalog

    return tuple(sorted(catalog.load()))


def all_codes() -> tuple[str, ...]:
    return tuple(sorted(set(rule_codes()) | set(TOOL_CODES)))


def selectable_codes() -> tuple[str, ...]:
    """What `select` / `ignore` can match: the rules and the run codes. E001,
    E902 and E999 say a file was not (fully) checked and are always shown."""
    return tuple(sorted(set(rule_codes()) | {c for c, t in TOOL_CODES.items()
                                              if t.origin == "run"}))


class SelectorError(ValueError):
    pass


def normalise_selector(text: str, where: str = "") -> str:
    """`pal1` -> `PAL1`; `ALL` stays; anything that is not a prefix of a code
    pallas-lsp can report raises SelectorError (a typo must not pass a CI job
    by selecting nothing)."""
    sel = text.strip().upper()
    if sel == "ALL":
        return sel
    known = selectable_codes()
    if sel and any(code.startswith(sel) for code in known):
        return sel
    prefix = f"{where}: " if where else ""
    if sel in TOOL_CODES or sel == "E" or (sel and any(c.startswith(sel) for c in TOOL_CODES)):
        raise SelectorError(f"{prefix}{text!r} cannot be selected or ignored: E001, E902 and "
                            f"E999 mean a file was not fully checked and are always reported "
                            f"(use `exclude` to skip a file)")
    # A letter typed for a digit (PAL1O3, PAL2I1) first, then the nearest code.
    head = "PAL" if sel.startswith("PAL") else ""
    lookalike = head + sel[len(head):].replace("O", "0").replace("I", "1").replace("L", "1")
    hint = [lookalike] if lookalike != sel and any(c.startswith(lookalike) for c in known) \
        else _close(sel, known)
    did_you_mean = f"; did you mean {hint[0]}?" if hint else ""
    raise SelectorError(f"{prefix}unknown rule code or prefix {text!r}{did_you_mean} "
                        f"(codes: PAL1xx, PAL2xx, PAL3xx, PAL4xx, PAL9xx; `ALL` selects every "
                        f"rule; `pallas-lsp rule --all` lists them)")


def matches(code: str, selectors) -> bool:
    return any(s == "ALL" or code.startswith(s) for s in selectors)


def specificity(selector: str) -> int:
    return -1 if selector == "ALL" else len(selector)


def _close(word: str, known) -> list[str]:
    import difflib  # only for a typo: every `check` passes here
    return difflib.get_close_matches(word, known, n=1, cutoff=0.6)
