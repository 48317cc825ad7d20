"""The abstract interpreter (see interpreter.py): `Interpreter` and the
names other modules and tests import from `pallas_lsp.engine.interp`."""
from pallas_lsp.engine.frames import MAX_DEPTH, MAX_STEPS, Budget, Frame, Module, Scope
from pallas_lsp.engine.interp.imports import LIBRARY_ROOTS, MAX_MODULES
from pallas_lsp.engine.interp.interpreter import Interpreter
from pallas_lsp.engine.interp.statements import MAX_LOOP_UNROLL_DEPTH, MAX_UNROLL

__all__ = ["Interpreter", "Frame", "Scope", "Module", "Budget", "LIBRARY_ROOTS", "MAX_DEPTH",
           "MAX_LOOP_UNROLL_DEPTH", "MAX_MODULES", "MAX_STEPS", "MAX_UNROLL"]
