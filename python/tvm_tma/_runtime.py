"""Locate and load ``libtvm_tma_runtime.so``, the C++ host runtime of tvm-tma.

The library registers global functions in the tvm-ffi registry when it is loaded
(``tvm_tma.encode_tiled``, ``tvm_tma.validate_tiled``, ``tvm_tma.validate_tiled_static``,
their im2col counterparts ``tvm_tma.encode_im2col``, ``tvm_tma.validate_im2col``,
``tvm_tma.validate_im2col_static``, and ``tvm_tma.encode_count``,
``tvm_tma.driver_available``, ``tvm_tma.driver_error``, ``tvm_tma.descriptor_cache_*``,
``tvm_tma.max_active_clusters``).
Generated host code reaches them by name through ``T.call_packed``, so loading the library
once per process is all that is needed; nothing is looked up from it directly.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

LIB_NAME = "libtvm_tma_runtime.so"
#: Set to a library path to override the search (e.g. a debug build).
ENV_VAR = "TVM_TMA_RUNTIME_LIB"
#: A function the library registers; its presence proves the load worked.
_PROBE_FUNC = "tvm_tma.encode_tiled"

_lock = threading.Lock()
_loaded_path: str | None = None


def _package_dirs() -> Iterator[Path]:
    """Directories of the ``tvm_tma`` package.

    Normally just the directory of this file. Editable installs can split the package: the
    Python sources stay in the checkout while the built library is installed into
    site-packages, and the package's ``__path__`` lists both.
    """
    yield Path(__file__).resolve().parent
    package = sys.modules.get(__package__ or "tvm_tma")
    for entry in getattr(package, "__path__", None) or ():
        yield Path(entry).resolve()


def _build_dirs() -> Iterator[Path]:
    """Development builds: ``<checkout>/build`` (plain CMake) and one level below it
    (scikit-build-core with ``build-dir = "build/{wheel_tag}"``)."""
    build = Path(__file__).resolve().parents[2] / "build"
    if build.is_dir():
        yield build
        yield from sorted(p for p in build.iterdir() if p.is_dir())


def _candidates() -> Iterator[Path]:
    for directory in _package_dirs():
        yield directory / LIB_NAME
    for directory in _build_dirs():
        yield directory / LIB_NAME


def find_runtime() -> Path:
    """Return the path of the runtime library, or raise ImportError saying where it looked."""
    override = os.environ.get(ENV_VAR)
    if override:
        path = Path(override)
        if not path.is_file():
            raise ImportError(f"{ENV_VAR}={override!r} does not name an existing file")
        return path
    searched = []
    for path in _candidates():
        if path.is_file():
            return path
        if path not in searched:
            searched.append(path)
    raise ImportError(
        f"tvm_tma: cannot find {LIB_NAME}; searched: "
        + ", ".join(str(p) for p in searched)
        + ". Install the package with `pip install .` (or `pip install -e .`) so the C++ "
        "runtime is built, build it with `cmake -S . -B build && cmake --build build`, "
        f"or point {ENV_VAR} at the library."
    )


def load_runtime() -> str:
    """Load the runtime library once per process and return its path.

    ``tvm_ffi`` is imported first: the library links ``libtvm_ffi.so``, and its build-time
    RUNPATH may point into a since-deleted build environment, so the copy that ``tvm_ffi``
    already loaded must be the one it binds to. ``tvm_ffi.load_module`` keeps the module
    alive for the life of the process, which matters because unloading the library would
    leave its registered globals pointing at unmapped code.
    """
    global _loaded_path
    if _loaded_path is not None:
        return _loaded_path
    with _lock:
        if _loaded_path is not None:
            return _loaded_path
        import tvm_ffi

        path = find_runtime()
        try:
            tvm_ffi.load_module(str(path))
        except Exception as err:  # surfaces as ImportError: the package is unusable without it
            raise ImportError(f"tvm_tma: failed to load {path}: {err}") from err
        if tvm_ffi.get_global_func(_PROBE_FUNC, allow_missing=True) is None:
            raise ImportError(f"tvm_tma: {path} loaded but did not register {_PROBE_FUNC}")
        _loaded_path = str(path)
        return _loaded_path
