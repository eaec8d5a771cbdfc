"""Where a copy's global operand lives: the kernel argument a view aliases.

A global operand may be a view declared inside the kernel (``A.sub[...]``,
``T.decl_buffer(..., A.data, elem_offset=...)``). The host encodes the tensor map, and a
view declared in device code does not exist there; its data is the argument's, so the map
is encoded over the argument's data. When the view's offset depends on the CTA, the map
cannot describe the view at all; it can describe the argument, whose shape the host knows.
TVM 0.27 hands a dispatch only the copy, so while the copy is parsed the hook follows the
view's ``data=X.data`` links through the builder's open frames up to a buffer of the
PrimFunc's buffer map and records that argument's whole region in the copy's config under
:data:`ARGUMENT_KEY`. Like the facts, it lives exactly as long as the kernel's IR and is
captured afresh when a printed kernel is parsed again.
"""

from __future__ import annotations

from collections.abc import Mapping

import tvm

from ..parse_frames import frames_being_parsed

#: The config key of ``copy_async`` that holds the aliased kernel argument (reserved).
ARGUMENT_KEY = "tma_argument"


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


def capture_argument(config: dict, dst, src) -> None:
    """Record the kernel argument whose data the global operand aliases, if it is a view."""
    config.pop(ARGUMENT_KEY, None)
    buffer = _global_buffer(dst, src)
    frames = frames_being_parsed()
    if buffer is None or not frames:
        return
    root = root_buffer(buffer, frames)
    if root.same_as(buffer):
        return
    for argument in dict(getattr(frames[0], "buffer_map", {}) or {}).values():
        if argument.same_as(root):
            config[ARGUMENT_KEY] = tvm.tirx.BufferRegion(
                argument, [tvm.ir.Range.from_min_extent(0, extent) for extent in argument.shape])
            return


def argument_of(config: Mapping | None):
    """The recorded kernel argument (a Buffer), or None."""
    region = config.get(ARGUMENT_KEY) if config is not None else None
    return getattr(region, "source", None)
