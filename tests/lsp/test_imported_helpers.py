"""A helper imported from another file: the server resolves it in the
background and then reports the bad argument at the call site."""
import asyncio
import textwrap

import pytest
from lsprotocol import types

from lsp_harness import start_session, wait_for

pytest.importorskip("jedi")

HELPER = '''
from jax.experimental.pallas import tpu as pltpu


def copy_in(src, dst, sem):
    c = pltpu.make_async_copy(src, dst, sem)
    c.start()
    c.wait()
'''

MAIN = '''
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from helpers import copy_in


def kernel(x_hbm, o_hbm, sems):
    copy_in(x_hbm, o_hbm, sems)


pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
               out_specs=pl.BlockSpec(memory_space=pl.ANY),
               scratch_shapes=[pltpu.SemaphoreType.DMA((2,))])
'''


async def test_imported_helper_is_checked_at_the_call_site(tmp_path):
    (tmp_path / "helpers.py").write_text(textwrap.dedent(HELPER), encoding="utf-8")
    main = tmp_path / "main.py"
    main.write_text(MAIN, encoding="utf-8")
    uri = main.as_uri()
    async with start_session("visual-studio-code", root=tmp_path,
                             init_options={"diagnostics": {"debounceMs": 0}}) as s:
        s.open(uri, MAIN)

        def reported():
            for p in s.client.published[uri]:
                hits = [d for d in p.diagnostics if d.code == "PAL103"]
                if hits:
                    return hits
            return None

        (d,) = await wait_for(reported, timeout=30)
        line = MAIN.split("\n").index("    copy_in(x_hbm, o_hbm, sems)")
        assert d.range.start.line == line
        (rel,) = d.related_information
        assert rel.location.uri == (tmp_path / "helpers.py").as_uri()
        assert rel.location.range.start.line == 5  # the make_async_copy line in helpers.py
