"""Launcher flag variants: which flags a launcher is run with both ways."""
from __future__ import annotations

import ast
import textwrap

import pytest

from pallas_lsp.engine import variants

LAUNCHER = '''
def launch(x, causal: bool = False, interpret: bool = False, debug=False):
    """`interpret`: run in interpret mode (if interpret, ...)."""
    def kernel(x_ref, o_ref):
        if causal:
            o_ref[...] = x_ref[...]
    return pl.pallas_call(kernel, out_shape=x, interpret=interpret, debug=debug)(x)
'''


def flags(source: str) -> set[str]:
    func = ast.parse(textwrap.dedent(source)).body[0]
    return {name for variant in variants.flag_variants(func) for name in variant}


def test_flags_that_only_feed_launch_options_get_no_variant():
    # interpret= and debug= change nothing the engine sees: no run for them.
    assert flags(LAUNCHER) == {"causal"}


@pytest.mark.parametrize("use", [
    "    if interpret:\n        x = x + 1\n",  # tested: a variant
    "    x = helper(x, interpret=interpret)\n",  # handed to a user function that may test it
    "    print('interpret' if interpret else '')  # a comment: interpret=interpret\n",
])
def test_a_flag_used_any_other_way_keeps_its_variant(use):
    source = LAUNCHER.replace("    return pl.pallas_call", use + "    return pl.pallas_call")
    assert "interpret" in flags(source)


def test_an_option_given_through_partial():
    source = '''
def launch(x, interpret: bool = False):
    call = functools.partial(pl.pallas_call, interpret=interpret)
    return call(kernel, out_shape=x)(x)
'''
    assert flags(source) == set()
