"""Where a copy's operands live: the kernel argument a global view aliases, and the shared
allocations behind the shared tile and the mbarrier.

TVM 0.27 hands a dispatch only the copy; how its buffers relate to each other is in the
statements around it (``T.decl_buffer(..., data=X.data)``, ``A.sub[...]``, ``T.alloc_buffer``),
visible only while the kernel is parsed. So the parse hook follows each operand's
``data=X.data`` links through the builder's open frames to the buffer that owns the data and
records, in the copy's config:

* :data:`ARGUMENT_KEY`: the kernel argument a global view aliases. The host encodes the
  tensor map over that argument's data (a view declared in device code does not exist
  there); a view placed by a CTA-dependent offset is mapped through the argument, and a
  view must lie inside it.
* :data:`SHARED_KEY` / :data:`MBAR_KEY`: the ``shared`` / ``shared.dyn`` allocation holding
  the shared tile / the mbarrier, so the planner can prove both lie inside it and that the
  copy does not write over its own mbarrier.

Each is a whole-buffer region; like the facts, it lives exactly as long as the kernel's IR
and is captured afresh when a printed kernel is parsed again.
"""

from __future__ import annotations

from collections.abc import Mapping

import tvm

from ..parse_frames import frames_being_parsed

#: Config keys of ``copy_async`` the parse hook writes (reserved).
ARGUMENT_KEY = "tma_argument"
SHARED_KEY = "tma_shared_allocation"
MBAR_KEY = "tma_mbar_allocation"
ROOT_KEYS = (ARGUMENT_KEY, SHARED_KEY, MBAR_KEY)


def _global_buffer(dst, src):
    for region in (src, dst):
        buffer = getattr(region, "source", None)
        if buffer is not None and buffer.scope() == "global":
            return buffer
    return None


def _parent(data):
    """The buffer whose data a view's data is (``tirx.buffer_data(parent)``), else None."""
    op = getattr(data, "op", None)
    if type(data).__name__ == "Call" and getattr(op, "name", "") == "tirx.buffer_data":
        return data.args[0]
    return None


def root_buffer(buffer, frames: list):
    """Follow ``T.decl_buffer(..., data=X.data)`` views (``.sub``, ``.view``, ``.tile`` make
    the same) from ``buffer`` up to the buffer that owns the data, through the builder's open
    ``DeclBufferFrame`` s. Returns ``buffer`` itself when it is no such view."""
    views = {}
    for frame in frames:
        if type(frame).__name__ == "DeclBufferFrame":
            parent = _parent(getattr(frame, "data", None))
            if parent is not None:
                views[frame.buffer] = parent
    seen = set()
    while buffer in views and buffer not in seen:
        seen.add(buffer)
        buffer = views[buffer]
    return buffer


def _whole(buffer):
    return tvm.tirx.BufferRegion(
        buffer, [tvm.ir.Range.from_min_extent(0, extent) for extent in buffer.shape])


def _allocation(buffer, frames: list):
    """The ``shared``/``shared.dyn`` allocation that owns ``buffer``'s data, or None."""
    root = root_buffer(buffer, frames)
    if not str(root.scope()).startswith("shared"):
        return None
    allocated = list(getattr(frames[0], "root_alloc_buffers", ()) or ())
    for frame in frames:
        allocated += [stmt.buffer for stmt in getattr(frame, "stmts", ())
                      if type(stmt).__name__ == "AllocBuffer"]
    return next((alloc for alloc in allocated if alloc.same_as(root)), None)


def _mbar_buffer(mbar):
    """The buffer of ``mbar=bars.ptr_to([i])`` (``address_of(bars[i])``), else None."""
    op = getattr(mbar, "op", None)
    if type(mbar).__name__ != "Call" or getattr(op, "name", "") != "tirx.address_of":
        return None
    target = mbar.args[0] if mbar.args else None
    return getattr(target, "buffer", None) or getattr(target, "source", None)


def capture_roots(config: dict, dst, src) -> None:
    """Record the roots of the copy's operands (see the module docstring)."""
    for key in ROOT_KEYS:
        config.pop(key, None)
    frames = frames_being_parsed()
    if not frames:
        return
    buffer = _global_buffer(dst, src)
    if buffer is not None:
        root = root_buffer(buffer, frames)
        arguments = dict(getattr(frames[0], "buffer_map", {}) or {}).values()
        argument = next((arg for arg in arguments if arg.same_as(root)), None)
        if argument is not None and not root.same_as(buffer):
            config[ARGUMENT_KEY] = _whole(argument)
    for key, shared in ((SHARED_KEY, _shared_buffer(dst, src)),
                        (MBAR_KEY, _mbar_buffer(config.get("mbar")))):
        allocation = _allocation(shared, frames) if shared is not None else None
        if allocation is not None:
            config[key] = _whole(allocation)


def _shared_buffer(dst, src):
    for region in (dst, src):
        buffer = getattr(region, "source", None)
        if buffer is not None and str(buffer.scope()).startswith("shared"):
            return buffer
    return None


def _recorded(config: Mapping | None, key: str):
    region = config.get(key) if config is not None else None
    return getattr(region, "source", None)


def argument_of(config: Mapping | None):
    """The recorded kernel argument (a Buffer), or None."""
    return _recorded(config, ARGUMENT_KEY)


def shared_allocation_of(config: Mapping | None):
    """The recorded allocation of the shared tile (a Buffer), or None."""
    return _recorded(config, SHARED_KEY)


def mbar_allocation_of(config: Mapping | None):
    """The recorded allocation of the mbarrier (a Buffer), or None."""
    return _recorded(config, MBAR_KEY)
