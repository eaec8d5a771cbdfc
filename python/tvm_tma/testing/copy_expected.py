"""The truth of a copy case from numpy alone: the data it runs on and the bytes it leaves.

It exists apart from :mod:`.copy_cases` (which describes a case and builds its kernel) so that
what a copy *means* is written once, away from how it is performed: random element bits,
the operands of a reduction, the fill of an out-of-bounds load (as the H100 writes it) and
the PTX ISA's tensor reductions, applied region by region in row-major pairing
(:func:`expected_after`). It reads a case only through :class:`CaseLike` (the attributes a
:class:`~.copy_cases.CopyCase` has), so it imports nothing of the package.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import tvm


class CaseLike(Protocol):
    """What :func:`expected_after` reads of a case (a :class:`~.copy_cases.CopyCase`)."""

    dtype: str
    direction: str
    global_shape: tuple[int, ...]
    global_extent: tuple[int, ...]
    stages: int
    oob: str | None
    cluster: int
    reduce: str | None

    @property
    def element_bytes(self) -> int: ...

    @property
    def s_extent(self) -> tuple[int, ...]: ...

    def stage_starts(self, stage) -> tuple[tuple, tuple]: ...


def _slices(starts, extents):
    return tuple(slice(s, s + e) for s, e in zip(starts, extents))


def random_array(shape, dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Random bits of ``dtype`` (every byte pattern, so a misplaced byte cannot hide)."""
    nbytes = math.prod(shape) * (tvm.DataType(dtype).bits // 8)
    raw = rng.integers(0, 256, size=nbytes, dtype=np.uint8)
    return raw.view(numpy_dtype(dtype)).reshape(shape)


def reduction_array(shape, dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Operands of a reduction: no random bits, since a NaN or an infinity would make the
    float results depend on how the hardware orders them. Floats are finite (scaled normals,
    one in twenty subnormal: where two meet, a flush to zero would show); integers mix every
    bit pattern with the values where the ops turn (0..3 and the type's extremes), so inc/dec
    see ``old == 0``, ``old == new``, ``old < new`` and ``old > new`` and add wraps."""
    count, kind = math.prod(shape), numpy_dtype(dtype)
    pick = rng.integers(0, 20, size=count)
    if np.dtype(kind).kind in "iu":
        values = random_array((count,), dtype, rng)
        small = rng.integers(0, 4, size=count).astype(kind)
        info = np.iinfo(kind)
        values = np.where(pick < 5, small, values)
        values = np.where((pick >= 5) & (pick < 8), np.array(info.max, kind) - small, values)
        values = np.where((pick >= 8) & (pick < 10), np.array(info.min, kind) + small, values)
        return values.astype(kind).reshape(shape)
    import ml_dtypes

    scale = np.where(pick == 0, float(ml_dtypes.finfo(kind).smallest_normal), 64.0)
    values = rng.standard_normal(count) * scale
    return values.astype(np.float32).astype(kind).reshape(shape)


def numpy_dtype(dtype: str):
    import ml_dtypes

    special = {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
               "float8_e5m2": ml_dtypes.float8_e5m2}
    return special.get(dtype, np.dtype(dtype))


#: What a load with ``oob="nan"`` writes for an element outside the tensor, by dtype. TMA
#: fills every 16-bit half-word with 0x7FF7 (measured on the H100; a quiet NaN in float16
#: and bfloat16, and 0x7FF77FF7 is one in float32).
NAN_FILL_BYTES = {"float16": b"\xf7\x7f", "bfloat16": b"\xf7\x7f",
                  "float32": b"\xf7\x7f\xf7\x7f", "float64": b"\xf7\x7f" * 4}


def _region_indices(starts, extents, shape):
    """Row-major index arrays of a region that may cross ``shape``'s edges, and which of its
    elements lie inside."""
    grids = np.indices(tuple(extents), dtype=np.int64).reshape(len(extents), -1)
    index = [grid + int(start) for grid, start in zip(grids, starts)]
    inside = np.ones(grids.shape[1], dtype=bool)
    for axis, extent in zip(index, shape):
        inside &= (axis >= 0) & (axis < extent)
    return index, inside


def expected_after(case: CaseLike, global_in: np.ndarray, shared_in: np.ndarray):
    """(global, shared-as-logical-array) after the copy, from the layouts' meaning alone.

    The two regions pair their elements in row-major order (TIRx ``copy_async``); with
    ``oob`` the global region may cross the view's edges: a load writes the fill there, a
    store leaves the tensor alone. A reduction combines instead of overwriting
    (:func:`reduce_elements`). In a cluster case ``shared_in`` holds one image per CTA
    (:attr:`~.copy_cases.CopyCase.images_shape`) and each ends as the one-CTA copy would leave it.
    """
    if case.cluster:
        images = [_expected_one(case, global_in, image)[1] for image in shared_in]
        return global_in.copy(), np.stack(images)
    return _expected_one(case, global_in, shared_in)


def _expected_one(case: CaseLike, global_in: np.ndarray, shared_in: np.ndarray):
    """:func:`expected_after` of one CTA's copy (every stage)."""
    glob, shared = global_in.copy(), shared_in.copy()
    for stage in range(max(case.stages, 1)):
        s_start, g_start = case.stage_starts(stage)
        s_sl = _slices(s_start, case.s_extent)
        g_index, inside = _region_indices(g_start, case.global_extent, case.global_shape)
        g_inside = tuple(axis[inside] for axis in g_index)
        tile = shared[s_sl]
        flat = tile.reshape(-1).copy()
        if case.direction == "g2s":
            flat[~inside] = _fill(case, int((~inside).sum()))
            flat[inside] = glob[g_inside]
            shared[s_sl] = flat.reshape(tile.shape)
        elif case.reduce is not None:
            glob[g_inside] = reduce_elements(case.reduce, glob[g_inside], flat[inside])
        else:
            glob[g_inside] = flat[inside]
    return glob, shared


def reduce_elements(op: str, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``op(old, new)`` element by element, in ``old``'s type, as the PTX ISA defines the
    tensor reductions. Written from the ISA apart from the TMA model's version, so that the
    fuzzer compares two readings of it."""
    if op == "add":
        return _add(old, new)
    if op in ("min", "max"):
        take_new = new < old if op == "min" else new > old
        return np.where(take_new, new, old).astype(old.dtype)
    if op in _BITWISE:
        bits = _unsigned(old.dtype)
        return _BITWISE[op](old.view(bits), new.view(bits)).view(old.dtype)
    if op == "inc":  # PTX: (old >= new) ? 0 : old + 1, unsigned
        return np.where(old >= new, 0, old + 1).astype(old.dtype)
    if op == "dec":  # PTX: (old == 0 || old > new) ? new : old - 1, unsigned
        return np.where((old == 0) | (old > new), new, old - 1).astype(old.dtype)
    raise ValueError(f"unknown reduction {op!r}")


_BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _unsigned(dtype) -> np.dtype:
    return np.dtype(f"uint{np.dtype(dtype).itemsize * 8}")


def _add(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``add`` of the tensor reduction: integers wrap; floats round the exact sum to nearest
    even and keep subnormals (measured on the H200 for f32 too: no flush to zero). The sum is
    taken in a type more than twice as precise, so rounding it once more changes nothing."""
    if old.dtype.kind in "iu":
        bits = _unsigned(old.dtype)
        return (old.view(bits) + new.view(bits)).view(old.dtype)
    wide = np.float64 if old.dtype == np.float32 else np.float32
    return (old.astype(wide) + new.astype(wide)).astype(old.dtype)


def _fill(case: CaseLike, count: int) -> np.ndarray:
    """``count`` out-of-bounds elements as a load with ``case.oob`` fills them."""
    width = case.element_bytes
    pattern = NAN_FILL_BYTES[case.dtype] if case.oob == "nan" else bytes(width)
    raw = np.frombuffer(pattern * count, dtype=np.uint8)
    return raw.view(numpy_dtype(case.dtype))
