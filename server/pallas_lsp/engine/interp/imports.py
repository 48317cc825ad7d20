"""Imports and other files: `import` / `from ... import` bind library names
as `Api` values and the user's own modules (resolved through project.py) as
`ModuleRef` / `Imported`; `load_module` runs another file's top level once
per analysis, `deref` / `module_attr` follow re-exports, `segment` reads a
node's source in whichever file it is."""
from __future__ import annotations

import ast

from pallas_lsp.engine import api
from pallas_lsp.engine.binding import inherited
from pallas_lsp.engine.frames import Frame, Module, real_path
from pallas_lsp.engine.model import Api, Value
from pallas_lsp.engine.values import UNKNOWN, Imported, ModuleRef

MAX_MODULES = 64  # other files one analysis may read (imports of imports included)
# Imports from these never lead to user helpers worth summarising.
LIBRARY_ROOTS = {"jax", "jaxlib", "numpy", "np", "functools", "math", "typing", "dataclasses",
                  "collections", "itertools", "os", "sys", "enum", "abc", "re", "logging",
                  "contextlib", "operator", "absl", "flax", "optax", "torch", "scipy"}


class ImportsMixin:
    """Imports and the user's other files."""

    def stmt_Import(self, node: ast.Import, frame: Frame) -> None:
        for alias in node.names:
            user = self._user_module(frame, alias.name, 0)
            if alias.asname:
                frame.scope.vars[alias.asname] = ModuleRef(path=user) if user else Api(
                    name=api.canonical(alias.name))
            else:
                top = alias.name.split(".")[0]
                user_top = self._user_module(frame, top, 0) if user else None
                frame.scope.vars[top] = ModuleRef(path=user_top) if user_top else Api(
                    name=api.canonical(top))

    def _user_module(self, frame: Frame, module: str, level: int) -> str | None:
        """The file of one of the user's modules, or None (a library, or no project)."""
        if self.project is None or (not level and module.split(".")[0] in LIBRARY_ROOTS):
            return None
        importing = frame.mod.path if frame.mod is not None else self.path
        try:
            return self.project.resolve(importing or None, module, level)
        except (OSError, ValueError):
            return None

    def stmt_ImportFrom(self, node: ast.ImportFrom, frame: Frame) -> None:
        target = self._user_module(frame, node.module or "", node.level)
        if target is not None:
            for alias in node.names:
                if alias.name == "*":
                    self._import_star(target, frame)
                else:
                    frame.scope.vars[alias.asname or alias.name] = Imported(path=target,
                                                                             name=alias.name)
            return
        for alias in node.names:
            if alias.name == "*":
                continue
            # `from pkg import mod` where pkg is a namespace package (a folder
            # without __init__.py): each name is a module of the user's.
            sub = self._user_module(frame, f"{node.module}.{alias.name}" if node.module
                                    else alias.name, node.level) \
                if node.level or node.module else None
            if sub is not None:
                frame.scope.vars[alias.asname or alias.name] = ModuleRef(path=sub)
            elif node.level or not node.module:
                frame.scope.vars[alias.asname or alias.name] = UNKNOWN
            else:
                name = api.canonical(f"{node.module}.{alias.name}")
                frame.scope.vars[alias.asname or alias.name] = \
                    inherited.foreign_launcher(name) or Api(name=name)

    def _import_star(self, target: str, frame: Frame) -> None:
        mod = self.load_module(target)
        if mod is not None:
            for k, v in mod.scope.vars.items():
                if not k.startswith("_"):
                    frame.scope.vars[k] = v

    def load_module(self, path: str) -> Module | None:
        """Run one of the user's other files (its top level only: defs,
        constants, classes), once per analysis."""
        key = self._real(path)
        mod = self.modules.get(key)
        if mod is not None:
            return mod
        if self.project is None or len(self.modules) > MAX_MODULES:
            return None
        src = self.project.source(key, parse_missing=self.parse_missing)
        if src is None:
            if not self.parse_missing:
                self.missing.add(key)
            return None
        mod = self.modules[key] = Module(key, src)
        self.deps.add(key)
        self.exec_body(src.tree.body, Frame(mod.scope, kernel=False, mod=mod))
        return mod

    def _real(self, path: str) -> str:
        """`real_path`, remembered by the project (one analysis asks for the
        same few modules thousands of times: a realpath is a stat per folder)."""
        return self.project.realpath(path) if self.project is not None else real_path(path)

    def segment(self, node: ast.AST) -> str:
        """Source text of a node, in whichever file it is."""
        return (getattr(node, "_pl_src", None) or self.src).segment(node)

    def deref(self, value: Value) -> Value:
        """What an imported name is, reading its module if needed (following
        re-exports, at most a few hops; import cycles end as Unknown)."""
        seen: set = set()
        while isinstance(value, Imported):
            if value in seen or len(seen) > 16:
                return UNKNOWN
            seen.add(value)
            mod = self.load_module(value.path)
            if mod is None:
                return UNKNOWN
            found = mod.scope.vars.get(value.name)
            if found is None or found == value:
                # `from pkg import mod` (a submodule), or a module that
                # imports the name from itself while still loading.
                sub = self.project.submodule(mod.path, value.name)
                return ModuleRef(path=self._real(sub)) if sub else UNKNOWN
            value = found
        return value

    def module_attr(self, ref: ModuleRef, attr: str) -> Value:
        mod = self.load_module(ref.path)
        if mod is None:
            return UNKNOWN
        found = mod.scope.vars.get(attr)
        if found is None:
            sub = self.project.submodule(mod.path, attr)
            return ModuleRef(path=self._real(sub)) if sub else UNKNOWN
        return self.deref(found)
