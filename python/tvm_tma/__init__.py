"""tvm-tma: Tensor Memory Accelerator copies for Apache TVM TIRx.

Importing the package (or just ``import tvm``, through the ``tvm.backends`` entry point)
registers the ``copy_async`` dispatch variant ``"tma"`` and loads the C++ runtime that
encodes tensor maps on the host.
"""

from __future__ import annotations

__version__ = "0.1.0"

_loaded = False


def _autoload() -> None:
    """Entry point of the ``tvm.backends`` group: called at the end of ``import tvm``."""
    global _loaded
    if _loaded:
        return
    from . import dispatch
    from ._runtime import load_runtime

    load_runtime()
    dispatch.register()
    _loaded = True


def is_registered() -> bool:
    """Whether the "tma" variant is registered in TVM's dispatch table."""
    from tvm.tirx.operator.tile_primitive import list_registered_schedules

    variants = list_registered_schedules().get("tirx.tile.copy_async", {}).get("cuda", [])
    return "tma" in variants


_autoload()

from . import intrin, planner  # noqa: E402  (after registration, like the entry point)

__all__ = ["intrin", "is_registered", "planner"]
