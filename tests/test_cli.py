"""The CLI as users and CI call it: a real subprocess, real files."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

BUGGY = '''\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def kernel(x_hbm, o_hbm, sems):
    pltpu.make_async_copy(x_hbm, o_hbm, sems).start()
    pltpu.make_async_copy(x_hbm, o_hbm, sems.at[0]).start(priority=-1)
    pltpu.make_async_copy(x_hbm, o_hbm, sems.at[0]).wait()


pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
               out_specs=pl.BlockSpec(memory_space=pl.ANY),
               scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
'''


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "pallas_lsp", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=60)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "k.py").write_text(BUGGY, encoding="utf-8")
    return tmp_path


def test_text_output_and_exit_code(project):
    r = cli("check", str(project))
    assert r.returncode == 1
    lines = r.stdout.strip().splitlines()
    # Not a terminal: concise lines, JAX's text, then ours after a dash; the summary.
    assert lines[0].startswith(f"{project / 'k.py'}:8:41: PAL103 error: Cannot signal on a "
                               "non-()-shaped semaphore: (2,) — `sems` is a whole array")
    assert ":9:" in lines[1] and "PAL108 [*] error: DMA start priority" in lines[1]
    assert lines[-2:] == ["Found 2 problems.", "[*] 1 fixable with `--fix` (1 more with "
                          "`--fix --unsafe-fixes`)."]


def test_json_output_is_one_based(project):
    r = cli("check", str(project / "k.py"), "--output-format", "json")
    rows = json.loads(r.stdout)
    assert [(x["code"], x["line"], x["column"], x["end_column"]) for x in rows] == [
        ("PAL103", 8, 41, 45), ("PAL108", 9, 68, 70)]
    assert set(rows[0]) == {"path", "line", "column", "end_line", "end_column", "code",
                            "message", "severity", "jax_message", "detail", "fix", "url",
                            "related"}
    assert rows[0]["message"] == f"{rows[0]['jax_message']} — {rows[0]['detail']}"
    assert rows[0]["fix"]["applicability"] == "unsafe" and rows[1]["fix"]["applicability"] == "safe"


def test_select_ignore_and_exit_zero(project):
    assert json.loads(cli("check", str(project), "--select", "PAL108",
                          "--output-format", "json").stdout)[0]["code"] == "PAL108"
    r = cli("check", str(project), "--ignore", "PAL1")
    assert r.returncode == 0 and r.stdout == "All checks passed!\n"
    assert cli("check", str(project), "--exit-zero").returncode == 0


def test_pyproject_config(project):
    (project / "pyproject.toml").write_text(
        '[tool.pallas-lsp]\nignore = ["PAL103"]\n[tool.pallas-lsp.severity]\nPAL108 = "warning"\n')
    rows = json.loads(cli("check", str(project), "--output-format", "json").stdout)
    assert [(x["code"], x["severity"]) for x in rows] == [("PAL108", "warning")]
    assert cli("check", str(project), "--no-config").stdout.count(": PAL") == 2


def test_bad_config_is_a_usage_error(project):
    (project / "pyproject.toml").write_text('[tool.pallas-lsp]\nselect = "PAL1"\n')
    r = cli("check", str(project))
    assert r.returncode == 2
    assert "select" in r.stderr


def test_unreadable_and_undecodable_files_are_reported(project):
    (project / "latin1.py").write_bytes(b"x = '\xe9t\xe9'\n")
    r = cli("check", str(project), "--output-format", "json")
    rows = json.loads(r.stdout)
    bad = [x for x in rows if x["path"].endswith("latin1.py")]
    assert bad and bad[0]["code"] == "E902" and "UTF-8" in bad[0]["message"]
    assert r.returncode == 1


def test_missing_path_is_a_usage_error():
    r = cli("check", "/no/such/path.py")
    assert r.returncode == 2 and "no such file" in r.stderr


def test_rule_markdown_and_json():
    r = cli("rule", "PAL103")
    assert r.returncode == 0
    assert r.stdout.startswith("# PAL103") and "Cannot signal on a non-()-shaped semaphore" in r.stdout
    data = json.loads(cli("rule", "--all", "--output-format", "json").stdout)
    assert {d["code"] for d in data} >= {"PAL101", "PAL111", "PAL208"}
    assert cli("rule", "PAL999").returncode == 2


def test_jax_ops_folder_is_clean_and_fast():
    import importlib.util
    ops = Path(importlib.util.find_spec("jax").origin).parent / "experimental/pallas/ops/tpu"
    r = cli("check", str(ops))
    assert r.returncode == 0, r.stdout
