"""`check --output-format`: every format through the real CLI, read back the
way its consumer reads it (SARIF against the 2.1.0 schema, workflow
commands as GitHub parses them, JUnit as XML)."""
from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlparse

import pytest

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"


def cli(*args: str, cwd: Path):
    return subprocess.run([sys.executable, "-m", "pallas_lsp", "check", "--no-config", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


BROKEN = "x = 1\nif x\n    pass\n"


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """The example (three findings, fixes safe and unsafe) and a file that
    does not parse (E999)."""
    root = tmp_path_factory.mktemp("formats")
    shutil.copy(REPO / "examples" / "double_buffer_bugs.py", root / "bugs.py")
    (root / "broken.py").write_text(BROKEN)
    return root


@pytest.fixture(scope="module")
def rows(tree):
    r = cli(".", "--output-format", "json", cwd=tree)
    assert r.returncode == 1
    return json.loads(r.stdout)


def test_json_rows(rows):
    assert [(r["path"], r["code"]) for r in rows] == [
        ("bugs.py", "PAL103"), ("bugs.py", "PAL101"), ("bugs.py", "PAL106"),
        ("broken.py", "E999")]
    r103 = rows[0]
    assert r103["jax_message"] == "Cannot signal on a non-()-shaped semaphore: (2,)"
    assert r103["related"][0]["message"].startswith("JAX raises here")
    assert r103["url"].startswith("https://github.com/jax-ml/jax/blob/jax-v")


def test_json_lines_are_the_json_rows(tree, rows):
    out = cli(".", "--output-format", "json-lines", cwd=tree).stdout
    assert [json.loads(line) for line in out.splitlines()] == rows


def test_sarif_validates_against_the_2_1_0_schema(tree, rows):
    import jsonschema

    log = json.loads(cli(".", "--output-format", "sarif", cwd=tree).stdout)
    schema = json.loads(SCHEMA.read_text())
    assert schema["$id"].endswith("sarif-schema-2.1.0.json")
    jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker()).validate(log)
    run = log["runs"][0]
    results = run["results"]
    assert [r["ruleId"] for r in results] == [r["code"] for r in rows]
    rules = {d["id"]: d for d in run["tool"]["driver"]["rules"]}
    assert set(rules) == {"PAL101", "PAL103", "PAL106", "E999"}
    assert "## JAX's message" in rules["PAL103"]["help"]["markdown"]
    assert rules["PAL103"]["helpUri"] == rows[0]["url"]
    assert "syntax" in rules["E999"]["shortDescription"]["text"].lower() or \
        "parse" in rules["E999"]["shortDescription"]["text"]
    for r in results:  # the indexes point at the right rule, the URIs are URIs
        assert run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
        loc = r["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert not urlparse(loc["artifactLocation"]["uri"]).scheme
    base = urlparse(run["originalUriBaseIds"]["%SRCROOT%"]["uri"])
    assert base.scheme == "file" and Path(base.path).samefile(tree)
    fix = results[1]["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert fix["insertedContent"]["text"] == "buf.at[slot]"


# `::level k=v,k=v::message`, as in GitHub's workflow commands reference.
COMMAND = re.compile(r"^::(error|warning|notice) ((?:[a-zA-Z]+=[^,:]*)(?:,[a-zA-Z]+=[^,:]*)*)"
                     r"::(.*)$")


def _unescape(text: str) -> str:
    return (text.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":")
            .replace("%2C", ",").replace("%25", "%"))


def test_github_lines_parse_as_workflow_commands(tree, rows):
    out = cli(".", "--output-format", "github", cwd=tree).stdout
    lines = out.splitlines()
    assert len(lines) == len(rows)
    for line, row in zip(lines, rows):
        m = COMMAND.match(line)
        assert m, line
        props = dict(kv.split("=", 1) for kv in m.group(2).split(","))
        assert m.group(1) == "error"
        assert _unescape(props["file"]) == row["path"]
        assert (int(props["line"]), int(props["col"])) == (row["line"], row["column"])
        assert int(props["endLine"]) == row["end_line"]
        assert _unescape(props["title"]) == f"pallas-lsp ({row['code']})"
        assert _unescape(m.group(3)).endswith(f"{row['code']} {row['message']}")


def test_junit_is_xml_with_one_failure_per_problem(tree, rows):
    root = ET.fromstring(cli(".", "--output-format", "junit", cwd=tree).stdout)
    assert root.tag == "testsuites" and root.get("failures") == str(len(rows))
    cases = root.findall("testsuite/testcase")
    assert [c.get("name") for c in cases] == [f"pallas-lsp.{r['code']}" for r in rows]
    assert cases[0].find("failure").get("message") == rows[0]["message"]


def test_concise_shows_severity_and_fixability(tree):
    out = cli(".", "--output-format", "concise", cwd=tree).stdout.splitlines()
    assert out[0].startswith("bugs.py:20:87: PAL103 error: Cannot signal on a non-()-shaped "
                             "semaphore: (2,) — `sems`")
    assert out[1].startswith("bugs.py:33:25: PAL101 [*] error: ")
    # The parser's line and column, not column 1.
    with pytest.raises(SyntaxError) as err:
        compile(BROKEN, "broken.py", "exec")
    assert err.value.offset > 1
    assert out[3].startswith(f"broken.py:{err.value.lineno}:{err.value.offset}: E999 error: "
                             f"SyntaxError: {err.value.msg}")
    assert out[-2:] == ["Found 4 problems.",
                        "[*] 2 fixable with `--fix` (1 more with `--fix --unsafe-fixes`)."]


def test_full_shows_source_related_lines_and_fix(tree):
    out = cli("bugs.py", "--output-format", "full", cwd=tree).stdout
    first = out.split("\n\n")[0].splitlines()
    assert first[0] == "PAL103 error: Cannot signal on a non-()-shaped semaphore: (2,)"
    assert first[1] == "  --> bugs.py:20:87"
    code = next(i for i, line in enumerate(first) if line.startswith("20 |"))
    caret = first[code + 1]
    assert caret.index("^") == first[code].index("sems)") and caret.count("^") == 4
    assert any(line.startswith("   = `sems` is a whole array") for line in first)
    assert "  ::: bugs.py:22:5: JAX raises here, when `.start()` traces the DMA" in first
    assert "22 |     fetch(0, 0).start()" in first
    assert any(line.startswith("help: Select one semaphore") and "unsafe fix" in line
               for line in first)
    assert any(line.startswith("20 | +") and line.endswith("sems.at[0])") for line in first)


def test_full_is_the_default_on_a_terminal_and_clean_runs_say_so(tree, tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    out = _on_a_terminal([sys.executable, "-m", "pallas_lsp", "check", "--no-config",
                          str(tree / "bugs.py")], cwd=tmp_path)
    assert "\x1b[" in out  # coloured
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "  --> " in plain and "^^^^" in plain and "Found 3 problems." in plain
    assert cli(str(tmp_path), cwd=tmp_path).stdout == "All checks passed!\n"


def _on_a_terminal(cmd, cwd) -> str:
    main, child = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    proc = subprocess.Popen(cmd, cwd=cwd, stdin=child, stdout=child, stderr=child, env=env)
    os.close(child)
    chunks = []
    while True:
        ready, _, _ = select.select([main], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(main)
    return b"".join(chunks).decode("utf-8", "replace")


def test_statistics_quiet_silent_and_output_file(tree, tmp_path):
    stats = cli(".", "--statistics", cwd=tree).stdout.splitlines()
    assert stats == ["1\tE999\t    syntax-error", "1\tPAL101\t[*] dma-argument-not-a-ref",
                     "1\tPAL103\t    dma-semaphore-not-scalar",
                     "1\tPAL106\t[*] wait-send-on-local-copy"]
    quiet = cli(".", "-q", "--output-format", "concise", cwd=tree)
    assert quiet.returncode == 1 and "Found" not in quiet.stdout and quiet.stdout.count("\n") == 4
    silent = cli(".", "--silent", cwd=tree)
    assert silent.returncode == 1 and silent.stdout == ""
    report = tmp_path / "report.sarif"
    r = cli(".", "--output-format", "sarif", "-o", str(report), cwd=tree)
    assert r.stdout == "" and json.loads(report.read_text())["version"] == "2.1.0"
