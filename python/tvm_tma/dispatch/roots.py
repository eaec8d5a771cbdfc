"""Where a copy's global operand lives: the kernel argument a view aliases.

A global operand may be a view declared inside the kernel (``A.sub[...]``,
``T.decl_buffer(..., A.data, elem_offset=...)``). When its offset depends on the CTA, the
tensor map (encoded on the host) cannot describe the view itself; it can describe the kernel
argument the view aliases, whose shape the host knows. TVM 0.27 hands a dispatch only the
copy, so while the copy is parsed the hook finds that argument in the PrimFunc frame's
buffer map (the buffer with the same data variable) and records its whole region in the
copy's config under :data:`ARGUMENT_KEY`. Like the facts, it lives exactly as long as the
kernel's IR and is captured afresh when a printed kernel is parsed again.
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


def capture_argument(config: dict, dst, src) -> None:
    """Record the kernel argument whose data the global operand aliases, if it is a view."""
    config.pop(ARGUMENT_KEY, None)
    buffer = _global_buffer(dst, src)
    frames = frames_being_parsed()
    if buffer is None or not frames:
        return
    for argument in dict(getattr(frames[0], "buffer_map", {}) or {}).values():
        if argument.data.same_as(buffer.data) and not argument.same_as(buffer):
            config[ARGUMENT_KEY] = tvm.tirx.BufferRegion(
                argument, [tvm.ir.Range.from_min_extent(0, extent) for extent in argument.shape])
            return


def argument_of(config: Mapping | None):
    """The recorded kernel argument (a Buffer), or None."""
    region = config.get(ARGUMENT_KEY) if config is not None else None
    return getattr(region, "source", None)
