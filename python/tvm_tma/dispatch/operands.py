"""The operands of a TMA copy that are addresses: what they must be, proven when it is built.

A wrong operand does not fail in ptxas: an integer constant as the mbarrier compiles into
``cvta`` of a made-up address, and a global pointer or a misaligned shared offset makes the
TMA complete on memory that is not a barrier (a hang, or corruption of the tile). So each
address operand is read as far as the IR shows its origin: ``buffer.ptr_to([...])`` carries
its buffer, whose scope and offset are checked; a pointer whose origin is not visible (a
kernel parameter, a pointer computed elsewhere) is left to the caller.
"""

from __future__ import annotations

import tvm

from ..planner.errors import refuse
from ..planner.proofs import Prover, as_int
from ..planner.views import element_offset

#: An mbarrier is one 8-byte word; ``mbarrier.*`` and TMA's complete_tx need it 8-aligned.
MBARRIER_BYTES = 8


def _pointer_type(value):
    ty = getattr(value, "ty", None)
    return ty if type(ty).__name__ == "PointerType" else None


def read_mbar(value, prover: Prover):
    """The ``mbar=`` operand, or a refusal naming the rule and the value.

    Accepted: a pointer into ``shared``/``shared.dyn`` whose byte offset is not provably
    misaligned, or a pointer (or 64-bit generic address) whose memory space cannot be known.
    """
    if isinstance(value, (bool, float, str)) or as_int(value) is not None:
        raise refuse("mbar", f"mbar={value!r} is a constant; it must be the shared-memory "
                     "address of an mbarrier, e.g. mbar=bars.ptr_to([stage])")
    pointer = _pointer_type(value)
    if pointer is None:
        dtype = str(getattr(getattr(value, "ty", None), "dtype", "") or "")
        if dtype not in ("uint64", "int64"):
            raise refuse("mbar", f"mbar={value} has type {dtype or type(value).__name__}; it "
                         "must be a pointer to an mbarrier in shared memory (ptr_to)")
        return value  # a 64-bit generic address computed elsewhere: its space is unknown
    scope = str(pointer.storage_scope)
    if scope and scope not in ("shared", "shared.dyn"):
        raise refuse("mbar", f"mbar={value} points into {scope!r} memory; an mbarrier lives "
                     "in shared memory")
    located = pointed_element(value)
    if located is not None:
        buffer, indices = located
        for dim, (index, size) in enumerate(zip(indices, buffer.shape)):
            if not prover.establish(tvm.tirx.all(index >= 0, index < size),
                                    f"mbar index ({buffer.name} dimension {dim})"):
                raise refuse("mbar", f"mbar={value} indexes {buffer.name} dimension {dim} at "
                             f"{index}, not provably inside [0, {size})")
        offset = mbar_byte_offset(value, prover)
        misaligned = tvm.tirx.floormod(offset, MBARRIER_BYTES) != 0
        if as_int(offset) is not None and as_int(offset) % MBARRIER_BYTES or (
            as_int(offset) is None and prover.prove(misaligned)
        ):
            raise refuse("mbar", f"mbar={value} is {offset} bytes into its shared allocation, "
                         f"not a multiple of {MBARRIER_BYTES} (an mbarrier is an aligned "
                         "8-byte word)")
    return value


def mbar_byte_offset(value, prover: Prover):
    """Bytes from its buffer's data pointer to the mbarrier ``value`` points at (the same
    pointer as the allocation's when the buffer is a view over it), or None when the IR
    does not show which buffer element it is."""
    located = pointed_element(value)
    if located is None:
        return None
    buffer, indices = located
    width = tvm.DataType(str(buffer.dtype)).bits // 8
    return prover.simplify(element_offset(buffer, indices, prover) * width)


def mbar_buffer(value):
    """The buffer the mbarrier pointer points into, or None."""
    located = pointed_element(value)
    return None if located is None else located[0]


def pointed_element(value):
    """``(buffer, indices)`` for ``T.address_of(buffer[indices])``, else None."""
    if type(value).__name__ != "Call" or getattr(value.op, "name", "") != "tirx.address_of":
        return None
    target = value.args[0]
    if type(target).__name__ not in ("BufferLoad", "TensorLoad"):
        return None
    buffer = getattr(target, "buffer", None) or target.source
    if not hasattr(buffer, "elem_offset"):
        return None
    return buffer, list(target.indices)
