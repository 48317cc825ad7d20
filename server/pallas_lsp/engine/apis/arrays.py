"""Arrays a caller builds before it launches a kernel: `jnp.zeros(shape,
dtype)`, `jnp.arange(n).reshape(16, 192)`, `jax.random.normal(key, shape,
jnp.float16)`, `x.astype(dt)`, `jnp.zeros_like(x)`, their numpy twins.
Each becomes an `Array` with the shape and dtype it has (either may stay
None: unknown), remembering the call that made it (`decl`), so that a
pallas_call given it knows its operands (binding/pallas_call.py).

Dtype defaults are jax's with 64-bit mode off (`jnp.zeros(s)` is float32,
`jnp.arange(n)` int32); a file that mentions x64 gets no default dtype. A
numpy array's default (float64 / int64) is what jax turns into 32 bits or
keeps, depending on that mode, so it stays unknown too."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from pallas_lsp.engine import vmem
from pallas_lsp.engine.binding.shapes import dim_of, dtype_of, shape_of
from pallas_lsp.engine.events import Arg, KernelOp, pick
from pallas_lsp.engine.model import Api, Array, Const, Seq, Value

if TYPE_CHECKING:
    from pallas_lsp.engine.frames import Frame
    from pallas_lsp.engine.host import Host

_FILLED = ("zeros", "ones", "empty")
_LIKE = ("zeros_like", "ones_like", "empty_like", "full_like")
_JAX_RANDOM = {"normal": "float32", "uniform": "float32", "truncated_normal": "float32",
               "randint": "int32", "bernoulli": "bool"}
MAX_SIZE = 1 << 40  # larger "arrays" are not shapes anyone runs


def handle(host: Host, name: str, t: str, args: list[Arg], kwargs: dict[str, Arg],
           node: ast.Call, frame: Frame) -> Value | None:
    if t:
        return None  # a pl. / pltpu. name
    lib, _, fn = name.rpartition(".")
    if lib in ("jnp", "numpy"):
        out = _constructor(host, lib == "jnp", fn, args, kwargs)
    elif lib == "jax.random" and fn in _JAX_RANDOM:  # (not Python's `random`)
        out = _jax_random(host, fn, args, kwargs)
    elif lib == "numpy.random":
        out = _numpy_random(fn, args, kwargs)
    elif name in ("lax.convert_element_type",):
        x, dt = pick(args, kwargs, 0, "operand"), pick(args, kwargs, 1, "new_dtype")
        out = _with_dtype(x.value, dt.value) if x is not None and dt is not None else None
    else:
        return None
    if out is None:
        return None
    if frame.kernel_id:  # as apis.call records the jnp calls it does not model
        host.events.kernel_ops.append(KernelOp("call", name, node, tuple(
            a.value for a in args), frame.kernel_id))
    return Array(origin=name, shape=out[0], dtype=out[1], decl=node)


def _default(host: Host, dtype: str) -> str | None:
    """jax's default dtype, unless the file may switch 64-bit mode on."""
    src = getattr(host, "src", None)
    text = getattr(src, "text", "")
    return None if "x64" in text else dtype


# The dtypes a shape or dtype argument may name (`jnp.int8`, `np.float16`, "bfloat16").
DTYPES = frozenset({"float32", "bfloat16", "float16", "float64", "int32", "int16", "int8",
                    "int64", "uint32", "uint16", "uint8", "uint64", "bool", "float8_e4m3fn",
                    "float8_e5m2", "int4", "uint4", "complex64"})


def dtype_name(v: Value) -> str | None:
    """The dtype `v` names, when it is one of DTYPES."""
    if isinstance(v, Api) and v.name.startswith(("jnp.", "numpy.", "ml_dtypes.")):
        name = v.name.rpartition(".")[2]
        name = "bool" if name == "bool_" else name
    else:
        name = dtype_of(v)
    return name if name in DTYPES else None


def _dtype(arg: Arg | None) -> str | None:
    return dtype_name(arg.value) if arg is not None else None


def _shape(arg: Arg | None):
    if arg is None:
        return None
    shape = shape_of([arg.value])
    if shape is None or not _plausible(shape):
        return None
    return shape


def _plausible(shape) -> bool:
    size = 1
    for d in shape:
        if d is not None and (d < 0):
            return False
        size *= d or 1
    return size <= MAX_SIZE


def _constructor(host: Host, is_jax: bool, fn: str, args, kwargs):
    if fn in _FILLED or fn == "full":
        shape = _shape(pick(args, kwargs, 0, "shape"))
        given = pick(args, kwargs, 2 if fn == "full" else 1, "dtype")
        dtype = _dtype(given)
        if given is None and is_jax:
            fill = pick(args, kwargs, 1, "fill_value") if fn == "full" else None
            dtype = _default(host, "float32") if fill is None else _literal_dtype(host, fill.value)
        return (shape, dtype) if shape is not None or dtype is not None else None
    if fn in _LIKE:
        x = pick(args, kwargs, 0, "a")
        base = x.value if x is not None else None
        if not isinstance(base, Array):
            return None
        given = _dtype(pick(args, kwargs, 2 if fn == "full_like" else 1, "dtype"))
        shape = _shape(pick(args, kwargs, 3 if fn == "full_like" else 2, "shape"))
        return (shape or base.shape, given or base.dtype)
    if fn == "arange":
        return _arange(host, is_jax, args, kwargs)
    if fn in ("asarray", "array"):
        x = pick(args, kwargs, 0, "a" if fn == "asarray" else "object")
        if x is None or not isinstance(x.value, Array):
            return None  # literals: not "obvious" enough to shape
        given = _dtype(pick(args, kwargs, 1, "dtype"))
        return (x.value.shape, given or x.value.dtype)
    if fn == "reshape":
        x = pick(args, kwargs, 0, "a")
        s = pick(args, kwargs, 1, "shape") or pick(args, kwargs, 1, "newshape")
        if x is None or s is None or not isinstance(x.value, Array):
            return None
        return (reshaped(x.value.shape, [s.value]), x.value.dtype)
    if fn == "astype":
        x, dt = pick(args, kwargs, 0, "x"), pick(args, kwargs, 1, "dtype")
        return _with_dtype(x.value, dt.value) if x is not None and dt is not None else None
    return None


def _literal_dtype(host: Host, v: Value) -> str | None:
    if isinstance(v, Const) and type(v.value) is bool:
        return "bool"
    if isinstance(v, Const) and type(v.value) is int:
        return _default(host, "int32")
    if isinstance(v, Const) and type(v.value) is float:
        return _default(host, "float32")
    return None


def _arange(host: Host, is_jax: bool, args, kwargs):
    bounds = [a.value for a in args[:3]]
    if "stop" in kwargs and len(bounds) == 1:
        bounds.append(kwargs["stop"].value)
    if not bounds:
        bounds = [kwargs["start"].value] if "start" in kwargs else []
    consts = [b.value if isinstance(b, Const) else None for b in bounds]
    given = _dtype(kwargs.get("dtype") or (args[3] if len(args) > 3 else None))
    shape = None
    if consts and all(type(c) is int for c in consts):
        try:
            shape = (len(range(*consts)),)
        except (TypeError, ValueError):
            shape = None
    dtype = given
    if dtype is None and is_jax and consts and all(c is not None for c in consts):
        dtype = _default(host, "float32" if any(type(c) is float for c in consts) else "int32")
    return (shape, dtype) if shape is not None or dtype is not None else None


def _jax_random(host: Host, fn: str, args, kwargs):
    if fn == "randint":
        shape_arg, dtype_arg = pick(args, kwargs, 1, "shape"), pick(args, kwargs, 4, "dtype")
    elif fn == "bernoulli":
        shape_arg, dtype_arg = pick(args, kwargs, 2, "shape"), None
    elif fn == "truncated_normal":
        shape_arg, dtype_arg = pick(args, kwargs, 3, "shape"), pick(args, kwargs, 4, "dtype")
    elif fn == "uniform":
        shape_arg, dtype_arg = pick(args, kwargs, 1, "shape"), pick(args, kwargs, 2, "dtype")
    else:
        shape_arg, dtype_arg = pick(args, kwargs, 1, "shape"), pick(args, kwargs, 2, "dtype")
    shape = _shape(shape_arg) if shape_arg is not None else ()
    if fn == "bernoulli":
        dtype = "bool"
    else:
        dtype = _dtype(dtype_arg) if dtype_arg is not None else _default(host, _JAX_RANDOM[fn])
    return (shape, dtype) if shape is not None or dtype is not None else None


def _numpy_random(fn: str, args, kwargs):
    """`np.random.randn(16, 256)` (float64: its dtype depends on jax's mode)."""
    if fn in ("randn", "rand") and not kwargs:
        return (tuple(dim_of(a.value) for a in args), None)
    if fn == "randint":
        size, dtype = kwargs.get("size") or (args[2] if len(args) > 2 else None), \
            _dtype(kwargs.get("dtype") or (args[3] if len(args) > 3 else None))
        shape = _shape(size) if size is not None else ()
        return (shape, dtype if dtype not in ("int64", "float64") else None)
    return None


def _with_dtype(x: Value, dt: Value):
    if not isinstance(x, Array):
        return None
    return (x.shape, dtype_name(dt))


def reshaped(shape, values: list[Value]):
    """The shape `reshape(*values)` gives an array of `shape` (a -1 solved
    when the size is known)."""
    new = shape_of(values)
    if new is None:
        return None
    if -1 not in new:
        if not _plausible(new) or (_size(shape) is not None and _size(new) is not None
                                   and _size(shape) != _size(new)):
            return None  # Python would raise: nothing to judge
        return new
    size = _size(shape)
    if new.count(-1) > 1 or None in new or size is None:
        return tuple(None if d == -1 else d for d in new)
    rest = 1
    for d in new:
        if d != -1:
            rest *= d
    if rest == 0 or size % rest:
        return None
    return tuple(size // rest if d == -1 else d for d in new)


def _size(shape) -> int | None:
    if shape is None or None in shape:
        return None
    size = 1
    for d in shape:
        size *= d
    return size


# numpy's itemsize (`x.dtype.itemsize`, `x.itemsize`): what a launcher that sizes
# blocks from a byte budget divides by. Not the VMEM footprint (bool is 4 there).
ITEMSIZE = {**vmem.ITEMSIZE, "bool": 1, "bool_": 1}


def dtype_itemsize(name: str) -> Value | None:
    """`jnp.float32.itemsize` / `x.dtype.itemsize` of a dtype the engine knows."""
    head, _, tail = name.rpartition(".")
    if head in ("jnp", "np", "numpy", "jax.numpy") and tail in ITEMSIZE:
        return Const(value=ITEMSIZE[tail])
    return None


def attribute(base: Array, attr: str) -> Value | None:
    """`x.shape`, `x.dtype`, `x.ndim`, `x.size`, `x.itemsize` of an array whose
    shape or dtype is known; None when not known."""
    known = base.shape is not None and None not in base.shape
    if attr == "itemsize" and base.dtype in ITEMSIZE:
        return Const(value=ITEMSIZE[base.dtype])
    if attr == "shape" and known:
        return Const(value=tuple(base.shape))
    if attr == "dtype" and base.dtype:
        return Api(name=f"jnp.{base.dtype}")
    if attr == "ndim" and base.shape is not None:
        return Const(value=len(base.shape))
    if attr == "size" and known:
        return Const(value=_size(base.shape))
    return None


def compare_dtypes(left: Value, right: Value, op: ast.cmpop) -> Const | None:
    """`x.dtype == jnp.int8`, `!=`, `x.dtype in (jnp.int8, jnp.uint8)`, decided
    as numpy does when every side names a known dtype and one of them is a
    dtype object (`x.dtype`, `jnp.int8`; two texts are Python's to compare).
    A launcher's branch on its caller's dtype then follows that dtype. `is`
    is left undecided: `x.dtype is jnp.int8` is False in numpy whatever x is.
    None when it cannot be told."""
    a = dtype_name(left)
    if a is None:
        return None
    if isinstance(op, (ast.Eq, ast.NotEq)):
        b = dtype_name(right)
        if b is None or not (isinstance(left, Api) or isinstance(right, Api)):
            return None
        return Const(value=(a == b) == isinstance(op, ast.Eq))
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, Seq) and right.keys is None:
        names = [dtype_name(v) for v in right.items]
        if None in names or not (isinstance(left, Api) or any(isinstance(v, Api)
                                                            for v in right.items)):
            return None
        return Const(value=(a in names) == isinstance(op, ast.In))
    return None


def method(obj: Array, name: str, args: list[Arg], kwargs: dict[str, Arg], node) -> Array:
    """`x.astype(dt)`, `x.reshape(...)`; any other method: an Array."""
    if name == "astype" and (args or "dtype" in kwargs):
        dt = dtype_name((args[0] if args else kwargs["dtype"]).value)
        return Array(origin=obj.origin, shape=obj.shape, dtype=dt, decl=obj.decl or node)
    if name == "reshape" and args and not kwargs:
        return Array(origin=obj.origin, shape=reshaped(obj.shape, [a.value for a in args]),
                     dtype=obj.dtype, decl=obj.decl or node)
    return Array(origin=obj.origin)
