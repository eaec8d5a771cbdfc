"""``python -m tvm_tma explain FILE.py [--func NAME] [--arch sm_90a]``.

Imports the file as a module (not as ``__main__``, so its script part does not run), finds
its PrimFuncs (module attributes, and the functions of module-level IRModules) or the one
named by ``--func`` (which may also be a function that builds one when called without
arguments), and prints the explanation of every TMA copy. Problems with the file itself are
:class:`ExplainError`s: one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import tvm

from .explain import explain
from .report import format_kernel


class ExplainError(Exception):
    """The file cannot be imported, or holds no PrimFunc to explain."""


def load_module(path: str | Path):
    path = Path(path)
    if not path.is_file():
        raise ExplainError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(f"tvm_tma_explain_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ExplainError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    except SystemExit as error:
        raise ExplainError(f"{path}: exited while being imported (status {error.code})") from None
    except BaseException as error:  # the user's file: any failure is reported, not raised
        if isinstance(error, KeyboardInterrupt):
            raise
        message = str(error).strip().splitlines()
        first = message[0] if message else ""
        raise ExplainError(f"{path}: cannot be imported: {type(error).__name__}: {first}"
                           ) from None
    finally:
        sys.path.pop(0)
    return module


def _functions_of(value, label: str) -> list[tuple[str, object]]:
    if isinstance(value, tvm.tirx.PrimFunc):
        return [(label, value)]
    if isinstance(value, tvm.IRModule):
        return [(f"{label}.{gv.name_hint}", func) for gv, func in value.functions.items()
                if isinstance(func, tvm.tirx.PrimFunc)]
    return []


def find_functions(module, name: str | None = None) -> list[tuple[str, object]]:
    """``(name, PrimFunc)`` pairs: every one of the module, or the one called ``name``."""
    if name is not None:
        if not hasattr(module, name):
            raise ExplainError(f"{module.__file__}: has no attribute {name!r}")
        value = getattr(module, name)
        if callable(value) and not isinstance(value, (tvm.tirx.PrimFunc, tvm.IRModule)):
            try:
                value = value()
            except Exception as error:
                raise ExplainError(f"{name}() failed: {type(error).__name__}: {error}"
                                   ) from None
        found = _functions_of(value, name)
        if not found:
            raise ExplainError(f"{name} is a {type(value).__name__}, not a PrimFunc")
        return found
    found = []
    for attribute, value in vars(module).items():
        if not attribute.startswith("__"):
            found += _functions_of(value, attribute)
    if not found:
        raise ExplainError(f"{module.__file__}: no @T.prim_func at module level (name a "
                           "function that builds one with --func)")
    return found


def run(path: str, func: str | None = None, arch: str = "sm_90a") -> int:
    try:
        functions = find_functions(load_module(path), func)
    except ExplainError as error:
        print(f"explain: {error}", file=sys.stderr)
        return 2
    reports = []
    for _, prim_func in functions:
        reports.append(format_kernel(explain(prim_func, arch)))
    print("\n\n".join(reports))
    return 0
