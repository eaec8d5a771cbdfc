"""Operands whose memory space the intrinsic verifier can see, shared by the verifier tests
and the bad-input tests: shared and global tiles, an mbarrier, descriptor slots in global
and shared memory, and a ``__grid_constant__`` tensor map parameter."""

from __future__ import annotations

import tvm
from tvm.script import tirx as T

SMEM = tvm.tirx.decl_buffer((8, 64), "float16", "smem", scope="shared.dyn")
GLOB = tvm.tirx.decl_buffer((8, 64), "float16", "A")
BAR = tvm.tirx.decl_buffer((1,), "uint64", "bar", scope="shared.dyn")
DESC_SMEM = tvm.tirx.decl_buffer((128,), "uint8", "desc_smem", scope="shared.dyn")
DESC_GLOB = tvm.tirx.decl_buffer((128,), "uint8", "desc_glob")
MAP = T.Var("m", ty=T.handle("tensormap").ty)


def smem():
    return SMEM.ptr_to([0, 0])


def glob():
    return GLOB.ptr_to([0, 0])


def mbar():
    return BAR.ptr_to([0])


def tmap():
    """A ``__grid_constant__`` tensor map kernel parameter (space "param")."""
    return T.address_of(MAP)


def gdesc():
    """A descriptor slot in global memory (for the device mutators)."""
    return DESC_GLOB.ptr_to([0])


def sdesc():
    """A descriptor slot in shared::cta memory."""
    return DESC_SMEM.ptr_to([0])
