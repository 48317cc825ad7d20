"""What the engine infers and reports. Pure data: no LSP, no jax.

Positions are 0-based lines and 0-based columns counted in Unicode code
points (Python string indices). The LSP layer converts them to the negotiated
position encoding; the CLI adds 1 to both.
"""
from __future__ import annotations

from dataclasses import field
from enum import Enum

from pallas_lsp.engine.records import frozen, record


# ---------------------------------------------------------------- positions


@frozen(order=True)
class Span:
    line: int
    col: int
    end_line: int
    end_col: int
    # The file, when it is not the one analysed (a helper reached from a
    # kernel launched here); "" for the analysed file itself.
    path: str = ""

    def contains(self, line: int, col: int) -> bool:
        if (line, col) < (self.line, self.col):
            return False
        return (line, col) <= (self.end_line, self.end_col)


# ---------------------------------------------------------------- values


class Space(str, Enum):
    """Memory space of a Ref as the kernel sees it."""

    VMEM = "VMEM"
    SMEM = "SMEM"
    ANY = "ANY"  # pl.ANY: whole array, left where it is (HBM on TPU)
    HBM = "HBM"
    VMEM_SHARED = "VMEM_SHARED"  # shared by a core's subcores (SparseCore, newer TensorCores)
    CMEM = "CMEM"  # a chip's common memory (v4, v5p): reached by DMA
    HOST = "HOST"  # the host's memory (`pl.HOST`): reached by DMA
    SEMAPHORE = "SEMAPHORE"
    UNKNOWN = "?"

    @property
    def dma_only(self) -> bool:
        return self in (Space.ANY, Space.HBM)


class SemKind(str, Enum):
    DMA = "DMA"
    REGULAR = "regular"
    BARRIER = "barrier"


Shape = tuple  # tuple[int | None, ...]; None = a dimension we cannot compute


@frozen
class Value:
    """Base of every abstract value. `origin` says where it came from."""

    origin: str = ""

    def describe(self) -> str:  # one line, shown in hover and inlay hints
        return "unknown"


@frozen
class Unknown(Value):
    """Anything the engine cannot pin down. Never produces a diagnostic."""


@frozen
class Ref(Value):
    """A Pallas Ref (or a view of one, e.g. `x.at[i]`).

    `sem` is set for semaphore Refs; `shape` is None when unknown.
    """

    space: Space = Space.UNKNOWN
    shape: Shape | None = None
    dtype: str | None = None
    sem: SemKind | None = None
    view: bool = False  # produced by .at[...] / bitcast / reshape
    # Which allocation this Ref (or view) belongs to: its first origin. Views
    # keep it, so `sems.at[0]` and `sems.at[1]` share a root. "?" = unknown.
    root: str = ""
    nullable: bool = False  # may be None instead (an optional operand or allocation)
    # What made it (go to the spec): the BlockSpec / allocation call node, or
    # an OperandDecl. Not part of the value's identity.
    decl: object = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if not self.root and self.origin:
            object.__setattr__(self, "root", self.origin)

    def describe(self) -> str:
        if self.sem is not None:
            kind = {SemKind.DMA: "DMA semaphore", SemKind.REGULAR: "regular semaphore",
                    SemKind.BARRIER: "barrier semaphore"}[self.sem]
            return f"{kind} · shape {fmt_shape(self.shape)}"
        parts = ["Ref"]
        if self.space is not Space.UNKNOWN:
            parts.append(self.space.value)
        if self.dtype or self.shape is not None:
            parts.append(f"{short_dtype(self.dtype)}{fmt_dims(self.shape)}")
        return " · ".join(parts)


@frozen
class Array(Value):
    """A traced value (jax.Array): what `x_ref[...]`, `x_ref[i]`, `pl.load`
    and arithmetic produce. `sem` is set when it was read out of a semaphore
    Ref (`sems[0]`), which is the classic way to lose Ref-ness."""

    shape: Shape | None = None
    dtype: str | None = None
    sem: SemKind | None = None
    decl: object = field(default=None, compare=False, repr=False)  # of the Ref it was read from
    # id() of the pallas_call node whose output this is (0: none known)
    made_by: int = field(default=0, compare=False, repr=False)

    def describe(self) -> str:
        if self.sem is not None:
            return f"Array (a {self.sem.value} semaphore value read out of a Ref, not a Ref)"
        if self.dtype or self.shape is not None:
            return f"Array · {short_dtype(self.dtype)}{fmt_dims(self.shape)}"
        return "Array"


@frozen
class Descriptor(Value):
    """An AsyncCopyDescriptor. `args` keeps the values it was built from."""

    remote: bool | None = None
    call_ids: frozenset = frozenset()  # ids of the DmaCall events that may have built it
    decl: object = field(default=None, compare=False, repr=False)  # the copy call

    def describe(self) -> str:
        if self.remote is None:
            return "copy descriptor"
        return "remote copy descriptor" if self.remote else "local copy descriptor"


@frozen
class Seq(Value):
    """A Python tuple/list (or dict) of values, e.g. refs in a list."""

    items: tuple = ()
    keys: tuple | None = None  # for dicts: the literal keys, parallel to items

    def describe(self) -> str:
        inner = ", ".join(v.describe() for v in self.items[:4])
        more = ", …" if len(self.items) > 4 else ""
        return f"({inner}{more})"


@frozen
class Const(Value):
    """A Python constant the engine tracked (int, bool, None, str, tuple)."""

    value: object = None

    def describe(self) -> str:
        return repr(self.value)


@frozen
class Func(Value):
    """A Python function the engine can analyse when called (a def or lambda
    node), with the arguments bound by functools.partial."""

    node: object = None
    scope: object = None  # the enclosing environment (closures)
    bound_args: tuple = ()
    bound_kwargs: tuple = ()  # ((name, Value), ...)
    # Defaults a nested def took when its statement ran (`def _do(src=src)`,
    # the idiom that pins a loop's value): ((name, Value), ...).
    captured: tuple = ()

    def describe(self) -> str:
        name = getattr(self.node, "name", "lambda")
        return f"function {name}"


@frozen
class Api(Value):
    """A Pallas API object, by canonical name, e.g. 'pltpu.make_async_copy'."""

    name: str = ""
    # The attribute node that named it (`pltpu.SemaphoreType.DMA` used bare
    # as an allocation); not part of the value's identity.
    decl: object = field(default=None, compare=False, repr=False)

    def describe(self) -> str:
        return self.name


def fmt_shape(shape: Shape | None) -> str:
    if shape is None:
        return "?"
    if len(shape) == 1:
        return f"({_d(shape[0])},)"
    return "(" + ", ".join(_d(d) for d in shape) + ")"


def fmt_dims(shape: Shape | None) -> str:
    if shape is None:
        return ""
    return "[" + ", ".join(_d(d) for d in shape) + "]"


def _d(d) -> str:
    return "?" if d is None else str(d)


_SHORT = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "float64": "f64",
          "int32": "i32", "int16": "i16", "int8": "i8", "int64": "i64", "uint32": "u32",
          "uint8": "u8", "bool": "bool", "bool_": "bool", "float8_e4m3fn": "f8e4m3fn",
          "float8_e5m2": "f8e5m2", "int4": "i4", "uint16": "u16"}


def short_dtype(dtype: str | None) -> str:
    if dtype is None:
        return "?"
    return _SHORT.get(dtype, dtype)


# ---------------------------------------------------------------- results


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@frozen
class Edit:
    span: Span
    new_text: str


@frozen
class Fix:
    title: str
    edits: tuple[Edit, ...]
    safe: bool  # safe fixes are preferred and applied by fix-all


@frozen
class Related:
    span: Span
    message: str
    path: str | None = None  # another file (an imported helper); None: this file


@frozen
class Finding:
    code: str
    # JAX's own text (the catalog's `jax_message`, formatted), so it can be
    # searched for; for checks JAX has no message for, a short title of ours.
    message: str
    span: Span
    severity: Severity = Severity.ERROR
    related: tuple[Related, ...] = ()
    fixes: tuple[Fix, ...] = ()
    detail: str = ""  # our explanation, about the user's own code

    @property
    def text(self) -> str:
        """What is shown: JAX's text, then ours after a dash."""
        return f"{self.message} — {self.detail}" if self.detail else self.message


@frozen
class NameInfo:
    """One occurrence of a name inside a kernel, with what it was inferred to
    be there. Hover and inlay hints read these."""

    span: Span
    name: str
    value: Value
    is_param: bool = False  # a kernel/body parameter (gets an inlay hint)
    is_assign: bool = False  # the target of an assignment
    decl: Span | None = None  # what made the value (its BlockSpec, allocation, operand, copy)


@frozen
class LaunchSite:
    """A kernel launch (pallas_call, pl.kernel, core_map, emit_pipeline).
    Spans with an empty path are in the analysed file."""

    api: str
    span: Span | None  # the launching call
    kernel: str  # the kernel function's name ("" when unknown)
    kernel_span: Span | None  # the kernel's name in its def (or the lambda)
    kernel_def: Span | None  # the whole def
    bound: bool  # its parameters were bound and its body run
    backend: str = "tpu"


@frozen
class CallArg:
    keyword: str | None  # None: positional
    span: Span | None  # the argument expression (None: from **kwargs / *args)
    value: Value


@frozen
class ApiCall:
    """A Pallas API call the engine evaluated, with the values of its
    arguments (joined over every time it ran)."""

    api: str  # canonical name, e.g. "pltpu.make_async_copy"
    span: Span  # the whole call
    args: tuple[CallArg, ...] = ()


@record
class Analysis:
    path: str | None
    findings: list[Finding] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)  # names of kernels found
    # Findings located in other files (helpers this file's kernels call),
    # by path, each with this file's launch as related information.
    foreign: dict[str, list[Finding]] = field(default_factory=dict)
    deps: set[str] = field(default_factory=set)  # other files the analysis read
    missing: set[str] = field(default_factory=set)  # files it wanted but did not parse
    coverage: object = None  # coverage.FileCoverage, when asked for
    incomplete: str | None = None  # the analysis stopped early (step budget), and why
    launches: list[LaunchSite] = field(default_factory=list)
    syntax_error: str | None = None  # first syntax error, if any (file still analysed)
    internal_error: str | None = None  # the engine failed on this file (a bug to report)
    # Built on first use (editor features only; the CLI never asks): callables
    # set by the engine, replaced by their result.
    lazy: dict = field(default_factory=dict, repr=False, compare=False)

    def _get(self, key: str) -> list:
        v = self.lazy.get(key)
        if callable(v):
            v = self.lazy[key] = v()
        return v if v is not None else []

    def settle(self) -> None:
        """Build every lazy part now (and let go of what building them needed)."""
        for key in list(self.lazy):
            self._get(key)

    @property
    def names(self) -> list[NameInfo]:
        """Every name the engine inferred in this file's kernels, by position."""
        self.lazy.setdefault("names", [])  # a list callers may add to (test engines do)
        return self._get("names")

    @property
    def calls(self) -> list[ApiCall]:
        """Pallas API calls in this file, with their arguments' values."""
        return self._get("calls")

    @property
    def launch_notes(self) -> list:
        """(Span of a TPU pallas_call, markdown of its scoped VMEM estimate)."""
        return self._get("launch_notes")

    @property
    def waits(self) -> list:
        """(kernel name, Span, "DMA wait" | "semaphore wait") of the waits in
        this file's kernels: where a run that hangs can be stuck."""
        return self._get("waits")

    def name_at(self, line: int, col: int) -> NameInfo | None:
        best = None
        for info in self.names:
            if info.span.line == line and info.span.col <= col <= info.span.end_col:
                best = info
        return best
