"""Formats for tools and CI: json, json-lines, github (workflow commands),
sarif (2.1.0, for code scanning) and junit."""
from __future__ import annotations

import json
import os

from pallas_lsp import __version__
from pallas_lsp.cli.output import Loc, Row, display_path, uri

TOOL = "pallas-lsp"


# ---------------------------------------------------------------- json


def _edit_dict(e) -> dict:
    s = e.span
    return {"content": e.new_text, "line": s.line + 1, "column": s.col + 1,
            "end_line": s.end_line + 1, "end_column": s.end_col + 1}


def row_dict(r: Row) -> dict:
    fix = None
    if r.fix is not None:
        fix = {"applicability": "safe" if r.fix.safe else "unsafe", "message": r.fix.title,
               "edits": [_edit_dict(e) for e in r.fix.edits]}
    row = {
        "path": r.loc.display, "line": r.loc.line, "column": r.loc.col,
        "end_line": r.loc.end_line, "end_column": r.loc.end_col,
        "code": r.code, "message": r.text, "jax_message": r.message, "detail": r.detail,
        "severity": r.severity, "fix": fix, "url": help_uri(r.code),
        "related": [_with_cell({"path": loc.display, "line": loc.line, "column": loc.col,
                                "message": message}, loc) for loc, message in r.related],
    }
    return _with_cell(row, r.loc)


def _with_cell(entry: dict, loc: Loc) -> dict:
    """In a notebook: `cell` (1-based); the lines, columns and fix edits are in it."""
    if loc.cell is not None:
        entry["cell"] = loc.cell
    return entry


def as_json(rows: list[Row], **_) -> str:
    return json.dumps([row_dict(r) for r in rows], indent=2, ensure_ascii=False) + "\n"


def as_json_lines(rows: list[Row], **_) -> str:
    return "".join(json.dumps(row_dict(r), ensure_ascii=False) + "\n" for r in rows)


# ---------------------------------------------------------------- github


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


_GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice", "hint": "notice"}


def as_github(rows: list[Row], **_) -> str:
    """One workflow command per problem: an annotation on the line in the
    pull request, and the concise line in the log."""
    out = []
    for r in rows:
        loc = r.loc
        cell = f" cell {loc.cell}" if loc.cell is not None else ""
        props = [f"title={_prop(f'{TOOL} ({r.code}){cell}')}", f"file={_prop(loc.display)}",
                 f"line={loc.line}", f"col={loc.col}", f"endLine={loc.end_line}",
                 f"endColumn={loc.end_col}"]
        text = f"{loc.where}: {r.code} {r.text}"
        out.append(f"::{_GITHUB_LEVEL.get(r.severity, 'error')} {','.join(props)}::{_data(text)}")
    return "\n".join(out) + ("\n" if out else "")


# ---------------------------------------------------------------- junit


def as_junit(rows: list[Row], **_) -> str:
    import xml.etree.ElementTree as ET  # junit only: every other format skips the import
    suites = ET.Element("testsuites", name=TOOL, tests=str(len(rows)),
                        failures=str(len(rows)), errors="0")
    by_file: dict[str, list[Row]] = {}
    for r in rows:
        by_file.setdefault(r.loc.display, []).append(r)
    for path, items in by_file.items():
        suite = ET.SubElement(suites, "testsuite", name=path, tests=str(len(items)),
                              failures=str(len(items)), errors="0", skipped="0")
        for r in items:
            case = ET.SubElement(suite, "testcase", name=f"{TOOL}.{r.code}",
                                 classname=os.path.splitext(path)[0].replace(os.sep, "."),
                                 file=path, line=str(r.loc.line))
            failure = ET.SubElement(case, "failure", message=r.text, type=r.code)
            cell = f"cell {r.loc.cell}, " if r.loc.cell is not None else ""
            failure.text = f"{cell}line {r.loc.line}, col {r.loc.col}, {r.text}"
            if r.fix is not None:
                failure.text += f"\nfix ({'safe' if r.fix.safe else 'unsafe'}): {r.fix.title}"
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"


# ---------------------------------------------------------------- sarif


def help_uri(code: str) -> str | None:
    """Where JAX raises (or decides) what the rule reports, in jax's sources
    at the version the catalog was written against."""
    from pallas_lsp import catalog

    try:
        entry = catalog.get(code)
    except catalog.CatalogError:
        return None
    if entry is None or not entry.raised_file.startswith("jax/") or not entry.jax_version:
        return None
    return (f"https://github.com/jax-ml/jax/blob/jax-v{entry.jax_version}/"
            f"{entry.raised_file}#L{entry.raised_line}")


_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note", "hint": "note"}


def _rule_descriptor(code: str) -> dict:
    from pallas_lsp import catalog
    from pallas_lsp.check.codes import TOOL_CODES

    entry = catalog.get(code)
    if entry is not None:
        desc = {"id": code, "name": entry.name,
                "shortDescription": {"text": entry.summary},
                "fullDescription": {"text": f"{entry.what}\n\n{entry.why}"},
                "help": {"text": entry.to_markdown(), "markdown": entry.to_markdown()},
                "defaultConfiguration": {"level": _SARIF_LEVEL.get(
                    entry.severity.replace("information", "info"), "error")},
                "properties": {"jaxMessage": entry.jax_message, "phase": entry.phase,
                               "fixSafety": entry.fix_safety,
                               "tags": ["pallas", "tpu", entry.phase]}}
        url = help_uri(code)
        if url:
            desc["helpUri"] = url
        return desc
    tool = TOOL_CODES.get(code)
    if tool is not None:
        return {"id": code, "name": tool.name, "shortDescription": {"text": tool.summary},
                "fullDescription": {"text": tool.what},
                "help": {"text": tool.to_markdown(), "markdown": tool.to_markdown()},
                "defaultConfiguration": {"level": "error"}}
    return {"id": code}


def _artifact(loc: Loc) -> dict:
    rel = display_path(loc.path)
    if os.path.isabs(rel):
        return {"uri": uri(loc.path)}
    return {"uri": rel.replace(os.sep, "/").replace("%", "%25").replace(" ", "%20"),
            "uriBaseId": "%SRCROOT%"}


def _region(loc: Loc) -> dict:
    """In a notebook the lines count in the cell, and the region says which
    (`properties.cell`, 1-based)."""
    region = {"startLine": loc.line, "startColumn": loc.col,
              "endLine": loc.end_line, "endColumn": max(loc.end_col, loc.col)}
    if loc.cell is not None:
        region["properties"] = {"cell": loc.cell}
    return region


def _span_region(span, cell: int | None = None) -> dict:
    region = {"startLine": span.line + 1, "startColumn": span.col + 1,
              "endLine": span.end_line + 1, "endColumn": span.end_col + 1}
    if cell is not None:
        region["properties"] = {"cell": cell}
    return region


def as_sarif(rows: list[Row], **_) -> str:
    codes = sorted({r.code for r in rows})
    index = {c: i for i, c in enumerate(codes)}
    results = []
    for r in rows:
        result = {
            "ruleId": r.code, "ruleIndex": index[r.code],
            "level": _SARIF_LEVEL.get(r.severity, "error"),
            "message": {"text": r.text},
            "locations": [{"physicalLocation": {"artifactLocation": _artifact(r.loc),
                                                "region": _region(r.loc)}}],
        }
        if r.related:
            result["relatedLocations"] = [
                {"id": i, "message": {"text": message},
                 "physicalLocation": {"artifactLocation": _artifact(loc), "region": _region(loc)}}
                for i, (loc, message) in enumerate(r.related)]
        if r.fix is not None:
            result["fixes"] = [{
                "description": {"text": r.fix.title},
                "artifactChanges": [{
                    "artifactLocation": _artifact(r.loc),
                    "replacements": [{"deletedRegion": _span_region(e.span, r.loc.cell),
                                      "insertedContent": {"text": e.new_text}}
                                     for e in r.fix.edits]}]}]
            result["properties"] = {"fixSafety": "safe" if r.fix.safe else "unsafe"}
        results.append(result)
    run = {
        "tool": {"driver": {"name": TOOL, "version": __version__,
                            "semanticVersion": __version__,
                            "rules": [_rule_descriptor(c) for c in codes]}},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": uri(os.getcwd()).rstrip("/") + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    log = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
           "runs": [run]}
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


RENDERERS = {"json": as_json, "json-lines": as_json_lines, "github": as_github,
             "junit": as_junit, "sarif": as_sarif}
