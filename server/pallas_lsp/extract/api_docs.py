"""Extract the signatures and docstrings of the Pallas APIs from an installed jax.

Runs as a script in the user's Python (which need not have pallas-lsp
installed): standard library and jax only. Prints one JSON object:

    {"format": 1, "jax_version": "...", "jax_path": "...", "apis": {
        "pltpu.make_async_copy": {"full_name", "kind", "signature", "params",
                                  "doc", "file", "line"}, ...}}

The server caches it on disk per jax version and path (lsp/api_docs.py), so
jax is imported once per installation, never in the server process.
"""
from __future__ import annotations

import enum
import importlib
import inspect
import json
import os
import sys

FORMAT = 1
MODULES = (("pl", "jax.experimental.pallas"), ("pltpu", "jax.experimental.pallas.tpu"))
MAX_DOC = 6000  # characters; hovers show the first 40 lines anyway


def _params(sig: inspect.Signature) -> list[dict]:
    out = []
    for p in sig.parameters.values():
        out.append({
            "name": p.name,
            "kind": p.kind.name.lower(),  # positional_only, positional_or_keyword, ...
            "default": None if p.default is inspect.Parameter.empty else _short(repr(p.default)),
            "annotation": None if p.annotation is inspect.Parameter.empty
            else _short(inspect.formatannotation(p.annotation)),
        })
    return out


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _kind(obj) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if isinstance(obj, enum.Enum):
        return "enum member"
    if callable(obj):
        return "function"
    return "object"


def _entry(short: str, obj) -> dict:
    kind = _kind(obj)
    target = type(obj) if kind in ("enum member", "object") else obj
    module = getattr(target, "__module__", None) or ""
    qual = getattr(target, "__qualname__", None) or getattr(target, "__name__", short)
    full = f"{module}.{qual}" if module else qual
    if kind == "enum member":
        full = f"{full}.{obj.name}"
    if kind == "module":
        full = obj.__name__
    entry = {"full_name": full, "kind": kind, "signature": None, "params": [], "doc": "",
             "file": None, "line": None}
    # Enum members that are called (`pltpu.VMEM(shape, dtype)`) have a signature too.
    enum_class = kind == "class" and issubclass(obj, enum.Enum)  # its "signature" is Enum's
    if (kind in ("function", "class") and not enum_class) or (kind == "enum member"
                                                              and callable(obj)):
        try:
            sig = inspect.signature(obj)
            entry["signature"] = f"{short.rsplit('.', 1)[-1]}{sig}"
            entry["params"] = _params(sig)
        except (TypeError, ValueError):
            pass
    entry["doc"] = _doc(obj, kind)[:MAX_DOC]
    try:
        src = inspect.unwrap(target) if kind == "function" else target
        entry["file"] = inspect.getsourcefile(src)
        entry["line"] = inspect.getsourcelines(src)[1]
    except (TypeError, OSError):
        pass
    return entry


def _doc(obj, kind: str) -> str:
    """The object's own docstring: a class without one would otherwise show
    its base's (every enum would read "Create a collection of name/value pairs")."""
    if kind in ("class", "enum member"):
        cls = obj if kind == "class" else type(obj)
        own = cls.__dict__.get("__doc__")
        return inspect.cleandoc(own) if isinstance(own, str) else ""
    if kind == "object":
        return ""
    try:
        return inspect.getdoc(obj) or ""
    except Exception:
        return ""


def _members(short: str, cls) -> dict:
    """Public members a class defines itself (enum members, methods)."""
    out = {}
    for name, member in list(vars(cls).items()):
        if name.startswith("_"):
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if isinstance(member, enum.Enum) or inspect.isfunction(member):
            out[f"{short}.{name}"] = _entry(f"{short}.{name}", member)
    if issubclass(cls, enum.Enum):
        for member in cls:
            out.setdefault(f"{short}.{member.name}", _entry(f"{short}.{member.name}", member))
    return out


def extract() -> dict:
    import jax

    apis: dict[str, dict] = {}
    for prefix, module_name in MODULES:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # a jax without this module: the rest still helps
            print(f"cannot import {module_name}: {exc}", file=sys.stderr)
            continue
        apis[prefix] = _entry(prefix, module)
        for name in sorted(dir(module)):
            if name.startswith("_"):
                continue
            try:
                obj = getattr(module, name)
            except Exception:
                continue
            if inspect.ismodule(obj):
                continue  # submodules: their own entries where they matter (pl.tpu)
            short = f"{prefix}.{name}"
            apis[short] = _entry(short, obj)
            if inspect.isclass(obj):
                apis.update(_members(short, obj))
    return {"format": FORMAT, "jax_version": getattr(jax, "__version__", "?"),
            "jax_path": os.path.dirname(os.path.realpath(jax.__file__)), "apis": apis}


def main() -> None:
    json.dump(extract(), sys.stdout)


if __name__ == "__main__":
    main()
