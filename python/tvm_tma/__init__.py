"""tvm-tma: Tensor Memory Accelerator copies for Apache TVM TIRx.

Importing the package (or just ``import tvm``, through the ``tvm.backends`` entry point)
registers the ``copy_async`` dispatch variant ``"tma"``, loads the C++ runtime that
encodes tensor maps on the host, and makes TVMScript macros find their parser without
reading source files (:mod:`.macro_lookup`).
"""

from __future__ import annotations

__version__ = "0.1.0"

_state = {"loaded": False, "loading": False}


def _autoload() -> None:
    """Entry point of the ``tvm.backends`` group, called at the end of ``import tvm``.

    Idempotent and re-entrant: ``import tvm_tma`` imports tvm, whose autoload calls back
    here while this package is still initializing.
    """
    if _state["loaded"] or _state["loading"]:
        return
    _state["loading"] = True
    try:
        from . import assume, dispatch, macro_lookup
        from ._runtime import load_runtime

        macro_lookup.install()
        load_runtime()
        dispatch.register()
        assume.register()
        _state["loaded"] = True
    finally:
        _state["loading"] = False


def is_registered() -> bool:
    """Whether the "tma" variant is in TVM's dispatch table for copy_async on cuda."""
    from tvm.tirx.operator.tile_primitive import list_registered_schedules

    variants = list_registered_schedules().get("tirx.tile.copy_async", {}).get("cuda", [])
    return "tma" in variants


import tvm  # noqa: E402,F401  (runs the entry point when tvm is imported here first)

_autoload()  # for source checkouts where the entry point is not installed

from . import intrin, planner  # noqa: E402
from .explainer import explain  # noqa: E402

__all__ = ["explain", "intrin", "is_registered", "planner"]
