"""What the engine knows of TPU generations and of the Pallas TPU lowering
(data only; no jax import).

* `DEFAULT_SCOPED_VMEM`: the scoped VMEM limit a `pallas_call` gets when it
  sets no `vmem_limit_bytes`, measured by compiling growing kernels with
  libtpu 0.0.42 (jax 0.10.2) until the compiler refused them.
* `data/tpu_lowering.json` (written by `python -m pallas_lsp.extract.tpu_lowering
  --write`): the primitives each TPU core type can lower, and the jnp / lax
  functions that always bind one it cannot.
"""
from __future__ import annotations

import functools
import json
from importlib import resources

MIB = 1 << 20
GENERATIONS = ("v4", "v5e", "v5p", "v6e")
DEFAULT_SCOPED_VMEM = {"v4": 16 * MIB, "v5e": 16 * MIB, "v5p": 16 * MIB, "v6e": 32 * MIB}
DEFAULT_GENERATIONS = ("v5e", "v6e")  # what the editor compiles for unless told otherwise


@functools.lru_cache(maxsize=1)
def lowering_data() -> dict:
    try:
        text = resources.files("pallas_lsp.engine").joinpath("data/tpu_lowering.json") \
            .read_text(encoding="utf-8")
        return json.loads(text)
    except (OSError, ValueError, ModuleNotFoundError):
        return {"lowering": {}, "apis": {}}


def unlowerable(api: str) -> list[str]:
    """The primitives with no TensorCore lowering that `api` (a canonical name
    such as `jnp.sort`) always binds; [] when it lowers or is not known."""
    return list(lowering_data().get("apis", {}).get(api, ()))


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for size, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
