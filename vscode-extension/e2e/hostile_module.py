# A module an attacker plants in a repository (the e2e test copies it in as
# json.py, typing.py, pallas_lsp.py, ...). When Python runs it, it appends
# its process's command line to the marker named in the first line, then
# loads the real module it shadows, so that whatever imported it (an
# explicit run, which may) keeps working.
MARKER = "@MARKER@"
import os as _os, sys as _sys  # noqa: E401,E402
with open(MARKER, "a") as _f:
    _f.write(f"{_os.path.basename(__file__)} ran in: "
             + open("/proc/self/cmdline").read().replace(chr(0), " ") + chr(10))
if __name__ not in ("sitecustomize", "usercustomize"):
    import importlib as _il  # noqa: E402
    _top = _os.path.dirname(_os.path.abspath(__file__))
    if _os.path.basename(__file__) == "__init__.py":
        _top = _os.path.dirname(_top)
    _saved = _sys.path[:]
    _sys.path[:] = [p for p in _saved if _os.path.abspath(p or ".") != _top]
    del _sys.modules[__name__]
    try:
        _il.import_module(__name__)  # now sys.modules holds the real one
    finally:
        _sys.path[:] = _saved
