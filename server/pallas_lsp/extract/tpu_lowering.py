"""Build `engine/data/tpu_lowering.json` from the installed jax (imports jax).

    python -m pallas_lsp.extract.tpu_lowering            # print the table
    python -m pallas_lsp.extract.tpu_lowering --write    # rewrite the shipped file

The engine never imports jax; it reads the file this writes:

* `lowering`: for each core type of the Pallas TPU lowering (`tc` the
  TensorCore, `sc_scalar_subcore`, `sc_vector_subcore`), the primitives that
  have a lowering rule in `jax._src.pallas.mosaic.lowering.lowering_rules`;
* `apis`: public `jax.numpy` / `jax.lax` / `jax.nn` functions that, traced on
  a small float32 array in every way tried here, always bind a primitive with
  no TensorCore rule, with those primitives. An API whose primitives depend
  on its arguments (some traced calls lower, some do not) is left out, so the
  static rule never judges it.

`tests/compile/test_lowering_table.py` fails when the installed jax's table
differs from the shipped file.
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "engine" / "data" / "tpu_lowering.json"
MODULES = (("jnp", "jax.numpy"), ("lax", "jax.lax"), ("jax.nn", "jax.nn"))
# Higher-order primitives whose bodies are lowered by inlining: look inside.
_SKIP = {"jnp": {"vectorize", "frompyfunc", "piecewise", "select", "apply_along_axis",
                 "apply_over_axes", "fromfunction", "from_dlpack", "load", "save"},
         "lax": {"cond", "switch", "while_loop", "fori_loop", "scan", "map", "associative_scan",
                 "custom_linear_solve", "custom_root", "stop_gradient", "platform_dependent",
                 "optimization_barrier", "pvary", "pcast", "axis_index", "axis_size",
                 "psum", "pmax", "pmin", "pmean", "ppermute", "all_gather", "all_to_all",
                 "psum_scatter", "pshuffle", "pbroadcast", "ragged_all_to_all", "pswapaxes",
                 "composite", "cond_p"}}


def lowering_table() -> dict[str, list[str]]:
    import jax.experimental.pallas.tpu  # noqa: F401 - registers the TPU primitives' rules
    from jax._src.pallas.mosaic import lowering

    out = {}
    for core, rules in lowering.lowering_rules.items():
        name = getattr(core, "value", None) or getattr(core, "name", None) or str(core)
        out[str(name)] = sorted({p.name for p in rules})
    return dict(sorted(out.items()))


def _primitives(jaxpr, acc: set) -> set:
    from jax._src import core

    for eqn in jaxpr.eqns:
        acc.add(eqn.primitive.name)
        for v in eqn.params.values():
            for sub in (v if isinstance(v, (list, tuple)) else [v]):
                if isinstance(sub, core.ClosedJaxpr):
                    _primitives(sub.jaxpr, acc)
                elif isinstance(sub, core.Jaxpr):
                    _primitives(sub, acc)
    return acc


def _attempts(fn):
    """Argument patterns to trace `fn` with."""
    import jax.numpy as jnp

    x = jnp.zeros((8, 128), jnp.float32)
    y = jnp.ones((8, 128), jnp.float32)
    # (traced arrays, static positional arguments after them, keywords)
    return [((x,), (), {}), ((x, y), (), {}), ((x,), (-1,), {}), ((x,), (1,), {}),
            ((x,), (0,), {}), ((x,), (), {"axis": -1}), ((x,), (), {"axis": 0}),
            ((x,), (1,), {"axis": 1}), ((x,), (1,), {"axis": 0})]


def api_table(tc: set[str]) -> dict[str, list[str]]:
    import importlib

    import jax

    out: dict[str, list[str]] = {}
    for prefix, modname in MODULES:
        mod = importlib.import_module(modname)
        skip = _SKIP.get(prefix, set())
        for name in sorted(dir(mod)):
            if name.startswith("_") or name in skip:
                continue
            fn = getattr(mod, name)
            if not callable(fn) or inspect.isclass(fn) or inspect.ismodule(fn):
                continue
            traced = []
            for arrays, static, kwargs in _attempts(fn):
                try:
                    jaxpr = jax.make_jaxpr(lambda *a: fn(*a, *static, **kwargs))(*arrays)
                except Exception:  # noqa: BLE001 - this pattern does not fit the API
                    continue
                traced.append(_primitives(jaxpr.jaxpr, set()) - tc)
            if not traced:
                continue
            missing = set.intersection(*traced)
            if missing and all(t for t in traced):
                out[f"{prefix}.{name}"] = sorted(missing)
    return out


def build() -> dict:
    import jax

    table = lowering_table()
    tc = set(table.get("tc", ()))
    return {"jax_version": jax.__version__, "lowering": table, "apis": api_table(tc)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"rewrite {DATA}")
    args = ap.parse_args(argv)
    data = build()
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if args.write:
        DATA.parent.mkdir(parents=True, exist_ok=True)
        DATA.write_text(text, encoding="utf-8")
        print(f"wrote {DATA} ({len(data['lowering'].get('tc', []))} tc primitives, "
              f"{len(data['apis'])} APIs without a TPU lowering)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
