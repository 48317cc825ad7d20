"""Emacs (batch, eglot) against the real server: diagnostic, hover, quick fix.

CI uses Debian's emacs-nox (28) with elpa-eglot; emacs_check.el evaluates the
eglot configuration in docs/editors/emacs.md as written, starts eglot explicitly
(`eglot-ensure` does not fire in batch mode) and checks the results.
"""
from __future__ import annotations

import shutil

import pytest

from editor_harness import HERE, REPO, check_result, editor_env, run_editor
from editor_harness import kernel  # noqa: F401  (fixture)

EMACS = shutil.which("emacs")


@pytest.mark.skipif(EMACS is None, reason="emacs is not installed (apt-get install -y emacs-nox elpa-eglot)")
def test_emacs_eglot(kernel, tmp_path):
    env = editor_env(tmp_path, kernel, PALLAS_DOC=str(REPO / "docs/editors/emacs.md"))
    result, proc = run_editor([EMACS, "-Q", "--batch", "-l", str(HERE / "emacs_check.el")],
                              env, kernel.parent)
    check_result(result, proc)
