"""Tests of the im2col half of the C++ host runtime: ``tvm_tma.encode_im2col``,
``tvm_tma.validate_im2col`` and ``tvm_tma.validate_im2col_static`` (cuTensorMapEncodeIm2col's
rules, the descriptor cache's im2col table, the driver call).

Everything except the tests marked ``gpu`` runs without a GPU: the validators only check the
rules, and ``encode_im2col`` checks them before it touches the driver. The cache and the
driver call are tested against a stand-in ``libcuda.so.1`` (C source below, built with the
system compiler) loaded by a subprocess that sees it first on ``LD_LIBRARY_PATH``: it records
every encode's arguments and writes a map that says which call made it, so "encoded once",
"replayed from the cache" and "the corners reached the driver in its order" are observable
without a driver. The ``gpu`` tests repeat the essentials on the real driver, and check that
the driver itself refuses what the rules refuse.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, replace

import pytest
import tvm_ffi
from runtime_buffers import MAP, cuda_tensor

from tvm_tma import _runtime

LIBRARY = _runtime.load_runtime()

validate_im2col = tvm_ffi.get_global_func("tvm_tma.validate_im2col")
validate_im2col_static = tvm_ffi.get_global_func("tvm_tma.validate_im2col_static")
encode_im2col = tvm_ffi.get_global_func("tvm_tma.encode_im2col")
validate_tiled = tvm_ffi.get_global_func("tvm_tma.validate_tiled")
encode_count = tvm_ffi.get_global_func("tvm_tma.encode_count")
driver_available = tvm_ffi.get_global_func("tvm_tma.driver_available")
driver_error = tvm_ffi.get_global_func("tvm_tma.driver_error")
cache_enable = tvm_ffi.get_global_func("tvm_tma.descriptor_cache_enable")
cache_stats = tvm_ffi.get_global_func("tvm_tma.descriptor_cache_stats")
cache_clear = tvm_ffi.get_global_func("tvm_tma.descriptor_cache_clear")

_driver_skip = pytest.mark.skipif(
    not driver_available(), reason=f"no usable CUDA driver: {driver_error()}"
)


def needs_driver(test):
    """A test that encodes through the real driver: part of the ``-m gpu`` run, and skipped
    where no driver loads."""
    return pytest.mark.gpu(_driver_skip(test))


@pytest.fixture(autouse=True)
def empty_descriptor_cache():
    cache_enable(True)
    cache_clear()
    yield
    cache_enable(True)
    cache_clear()


@dataclass(frozen=True)
class Im2col:
    """One im2col encode, arrays in driver order (innermost first): dims C, W[, H[, D]], N;
    corners W first."""

    dtype: str = "float16"
    rank: int = 4
    address: int = 0x10000
    dims: tuple = (64, 8, 8, 2)
    strides: tuple = (128, 1024, 8192)
    lower: tuple = (-1, -1)
    upper: tuple = (-1, -1)
    channels: int = 64
    pixels: int = 64
    estrides: tuple = (1, 1, 1, 1)
    interleave: int = 0
    swizzle: int = 3
    l2: int = 2
    oob: int = 0

    def static_args(self) -> list:
        """The compile-time layout of validate_im2col_static: no address."""
        return [
            self.dtype,
            self.rank,
            *self.dims,
            *self.strides,
            *self.lower,
            *self.upper,
            self.channels,
            self.pixels,
            *self.estrides,
            self.interleave,
            self.swizzle,
            self.l2,
            self.oob,
        ]

    def args(self, address=None) -> list:
        """The run-time layout shared by validate_im2col and encode_im2col (minus the map)."""
        head = self.static_args()
        return [*head[:2], self.address if address is None else address, *head[2:]]

    @property
    def nbytes(self) -> int:
        """Bytes from the base to one past the last element."""
        width = ELEMENT_BYTES[self.dtype]
        strides = (width, *self.strides)
        return width + sum((d - 1) * s for d, s in zip(self.dims, strides))


ELEMENT_BYTES = {
    "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "uint16": 2, "int16": 2,
    "float16": 2, "bfloat16": 2, "uint32": 4, "int32": 4, "float32": 4, "uint64": 8,
    "int64": 8, "float64": 8,
}
#: CUtensorMapDataType of each name (types without an enum travel as the same-width uint).
DTYPE_CODES = {
    "uint8": 0, "int8": 0, "float8_e4m3fn": 0, "float8_e5m2": 0, "uint16": 1, "int16": 1,
    "uint32": 2, "int32": 3, "uint64": 4, "int64": 5, "float16": 6, "float32": 7,
    "float64": 8, "bfloat16": 9,
}

# An NHWC float16 activation (N=2, H=8, W=8, C=64) read as 64 pixels of 64 channels with a
# one-pixel halo (a 3x3 convolution with padding 1) under 128-byte swizzle.
NHWC = Im2col()
# NWC (rank 3) and NDHWC (rank 5) with the same channels.
NWC = replace(NHWC, rank=3, dims=(64, 16, 2), strides=(128, 2048), lower=(-1,), upper=(-1,),
              estrides=(1, 1, 1))
NDHWC = replace(NHWC, rank=5, dims=(64, 4, 4, 4, 2), strides=(128, 512, 2048, 8192),
                lower=(-1, -1, -1), upper=(-1, -1, -1), estrides=(1,) * 5)
BY_RANK = {3: NWC, 4: NHWC, 5: NDHWC}

#: float16 channels that fill each swizzle span exactly (none: any multiple of 8).
CHANNELS_FOR_SWIZZLE = {0: 64, 1: 16, 2: 32, 3: 64}


def test_runtime_registers_the_im2col_functions():
    for name in ("encode_im2col", "validate_im2col", "validate_im2col_static"):
        assert tvm_ffi.get_global_func(f"tvm_tma.{name}", allow_missing=True) is not None


@pytest.mark.parametrize("swizzle", [0, 1, 2, 3])
@pytest.mark.parametrize("rank", [3, 4, 5])
def test_good_maps_pass(rank, swizzle):
    case = replace(BY_RANK[rank], swizzle=swizzle, channels=CHANNELS_FOR_SWIZZLE[swizzle])
    assert validate_im2col(*case.args()) is None
    assert validate_im2col_static(*case.static_args()) is None


def test_interleave_32b_takes_any_swizzle_as_the_driver_does():
    """Measured on the H100 (test_the_driver_agrees_with_the_rules): the driver encodes an
    im2col map with interleave 32B under swizzle 0 and 3, so no interleave-swizzle rule
    applies to im2col maps (cuda.h states the pairing for tiled maps)."""
    for swizzle in (0, 3):
        case = replace(NHWC, interleave=2, swizzle=swizzle, address=0x10020)
        assert validate_im2col(*case.args()) is None


VALID = [
    pytest.param(replace(NWC, lower=(-(2**15),), upper=(2**15 - 1,)), id="rank3-corner-limits"),
    pytest.param(replace(NHWC, lower=(-128, -128), upper=(127, 127)), id="rank4-corner-limits"),
    pytest.param(replace(NDHWC, lower=(-16,) * 3, upper=(15,) * 3), id="rank5-corner-limits"),
    pytest.param(
        replace(NHWC, dims=(64, 256, 8, 2), strides=(128, 32768, 262144), lower=(127, 0),
                upper=(-128, 0)),
        id="crossed-corners-one-pixel",
    ),
    pytest.param(replace(NHWC, lower=(3, 0), upper=(-4, 0)), id="one-pixel-wide-box"),
    pytest.param(replace(NHWC, lower=(0, 0), upper=(-2, -2)), id="no-padding-3x3"),
    pytest.param(replace(NHWC, channels=8, swizzle=0), id="channels-16-bytes"),
    pytest.param(replace(NHWC, channels=256, swizzle=0, dims=(256, 8, 8, 2),
                         strides=(512, 4096, 32768)), id="channels-256"),
    pytest.param(replace(NHWC, dtype="uint8", channels=256, swizzle=0), id="channels-256-uint8"),
    pytest.param(replace(NHWC, pixels=1), id="pixels-1"),
    pytest.param(replace(NHWC, pixels=1024), id="pixels-1024"),
    pytest.param(replace(NHWC, estrides=(1, 2, 2, 1)), id="traversal-stride-2"),
    pytest.param(replace(NHWC, estrides=(8, 8, 8, 8)), id="element-strides-8"),
    pytest.param(replace(NHWC, oob=1, l2=3), id="nan-fill"),
    pytest.param(replace(NHWC, l2=0), id="no-l2-promotion"),
    pytest.param(
        replace(NHWC, interleave=1, swizzle=0, dims=(8, 8, 8, 16), strides=(16, 128, 1024),
                channels=8),
        id="interleave16",
    ),
    pytest.param(
        replace(NHWC, interleave=2, swizzle=1, address=0x10020, dims=(16, 8, 8, 8),
                strides=(32, 256, 2048), channels=16),
        id="interleave32",
    ),
    pytest.param(replace(NHWC, dims=(2**32, 8, 8, 2), strides=(2**40 - 16, 1024, 8192)),
                 id="dim-and-stride-limits"),
    pytest.param(replace(NHWC, strides=(0, 0, 0)), id="broadcast-strides"),
    pytest.param(replace(NHWC, address=ctypes.c_void_p(0x10000)), id="opaque-address"),
]


@pytest.mark.parametrize("case", VALID)
def test_valid_maps_pass(case):
    assert validate_im2col(*case.args()) is None


@pytest.mark.parametrize("dtype", sorted(ELEMENT_BYTES))
def test_every_dtype_is_known(dtype):
    validate_im2col(*replace(NHWC, dtype=dtype, channels=128 // ELEMENT_BYTES[dtype]).args())


def _rank(n: int, **kw) -> Im2col:
    """An im2col map of any rank (also the ones the rules refuse)."""
    spatial = max(n - 2, 0)
    return replace(NHWC, rank=n, dims=(64,) + (8,) * (n - 1),
                   strides=tuple(128 * 8**i for i in range(max(n - 1, 0))),
                   lower=(-1,) * spatial, upper=(-1,) * spatial, estrides=(1,) * n, **kw)


# (case, rule, text the message must contain: the offending value)
RULE_CASES = [
    (_rank(2), "im2col-rank", "rank 2"),
    (_rank(1), "im2col-rank", "rank 1"),
    (_rank(0), "im2col-rank", "rank 0"),
    (_rank(6), "im2col-rank", "rank 6"),
    (replace(NHWC, dtype="float7"), "dtype", "'float7'"),
    (replace(NHWC, interleave=3), "enum", "interleave 3"),
    (replace(NHWC, interleave=-1), "enum", "interleave -1"),
    (replace(NHWC, swizzle=7), "enum", "swizzle 7"),
    (replace(NHWC, l2=4), "enum", "l2_promotion 4"),
    (replace(NHWC, oob=2), "enum", "oob_fill 2"),
    (replace(NHWC, address=0x10003), "global-address-align", "0x10003"),
    (replace(NHWC, address=0x10008), "global-address-align", "0x10008"),
    (replace(NHWC, address=0), "global-address-align", "null"),
    (replace(NHWC, interleave=2, swizzle=1, channels=16, address=0x10010),
     "global-address-align", "0x10010"),
    (replace(NHWC, dims=(64, 0, 8, 2)), "global-dim", "dims[1] = 0"),
    (replace(NHWC, dims=(64, 8, 8, -2)), "global-dim", "dims[3] = -2"),
    (replace(NHWC, dims=(2**32 + 1, 8, 8, 2)), "global-dim", f"dims[0] = {2**32 + 1}"),
    (replace(NHWC, strides=(136, 1024, 8192)), "global-stride", "strides[0] = 136"),
    (replace(NHWC, strides=(128, -1024, 8192)), "global-stride", "strides[1] = -1024"),
    (replace(NHWC, strides=(128, 1024, 2**40)), "global-stride", f"strides[2] = {2**40}"),
    (replace(NHWC, interleave=2, swizzle=1, channels=16, address=0x10020,
             strides=(144, 1024, 8192)), "global-stride", "strides[0] = 144"),
    (replace(NWC, lower=(-(2**15) - 1,)), "im2col-corner", f"lower_corner[0] = {-(2**15) - 1}"),
    (replace(NWC, upper=(2**15,)), "im2col-corner", f"upper_corner[0] = {2**15}"),
    (replace(NHWC, lower=(-1, -129)), "im2col-corner", "lower_corner[1] = -129"),
    (replace(NHWC, upper=(128, -1)), "im2col-corner", "upper_corner[0] = 128"),
    (replace(NDHWC, lower=(-1, -1, -17)), "im2col-corner", "lower_corner[2] = -17"),
    (replace(NDHWC, upper=(-1, 16, -1)), "im2col-corner", "upper_corner[1] = 16"),
    (replace(NHWC, lower=(4, -1), upper=(-4, -1)), "im2col-bounding-box",
     "8 - 4 - 4 = 0 pixels"),
    (replace(NWC, lower=(10,), upper=(-7,)), "im2col-bounding-box", "16 - 7 - 10 = -1 pixels"),
    (replace(NDHWC, lower=(-1, -1, 2), upper=(-1, -1, -2)), "im2col-bounding-box",
     "dims[3] + upper_corner[2] - lower_corner[2] = 4 - 2 - 2 = 0"),
    (replace(NHWC, channels=0), "im2col-channels", "channels_per_pixel = 0"),
    (replace(NHWC, channels=-8), "im2col-channels", "channels_per_pixel = -8"),
    (replace(NHWC, channels=257, swizzle=0), "im2col-channels", "channels_per_pixel = 257"),
    (replace(NHWC, pixels=0), "im2col-pixels", "pixels_per_column = 0"),
    (replace(NHWC, pixels=1025), "im2col-pixels", "pixels_per_column = 1025"),
    (replace(NHWC, estrides=(0, 1, 1, 1)), "element-stride", "element_strides[0] = 0"),
    (replace(NHWC, estrides=(1, 1, 9, 1)), "element-stride", "element_strides[2] = 9"),
    (replace(NHWC, swizzle=0, channels=4), "inner-box-16B", "4 * 2 = 8 bytes"),
    (replace(NHWC, swizzle=0, dtype="float32", channels=3), "inner-box-16B", "3 * 4 = 12"),
    (replace(NHWC, swizzle=0, dtype="uint8", channels=1), "inner-box-16B", "1 * 1 = 1 bytes"),
    (replace(NHWC, channels=128), "swizzle-span", "128 * 2 = 256 bytes"),
    (replace(NHWC, swizzle=1, channels=32), "swizzle-span", "32 * 2 = 64 bytes"),
    (replace(NHWC, swizzle=2, channels=64), "swizzle-span", "64 * 2 = 128 bytes"),
    (replace(NHWC, dtype="int32", channels=32, oob=1), "oob-fill-dtype", "'int32'"),
    (replace(NHWC, dtype="uint8", channels=128, oob=1), "oob-fill-dtype", "'uint8'"),
]


def _case_id(case) -> str:
    return f"{case[1]}:{case[2]}"


@pytest.mark.parametrize("case,rule,value", [pytest.param(*c, id=_case_id(c)) for c in RULE_CASES])
def test_each_rule_names_itself_and_the_value(case, rule, value):
    with pytest.raises(ValueError) as info:
        validate_im2col(*case.args())
    message = str(info.value)
    assert f"tvm_tma: rule '{rule}'" in message
    assert value in message


def test_every_rule_is_covered():
    """Each rule of the im2col checker has at least one failing case above."""
    rules = {
        "im2col-rank",
        "dtype",
        "enum",
        "global-address-align",
        "global-dim",
        "global-stride",
        "im2col-corner",
        "im2col-bounding-box",
        "im2col-channels",
        "im2col-pixels",
        "element-stride",
        "inner-box-16B",
        "swizzle-span",
        "oob-fill-dtype",
    }
    assert rules == {rule for _, rule, _ in RULE_CASES}


def test_corner_messages_name_the_dimension_and_the_range():
    with pytest.raises(ValueError) as info:
        validate_im2col(*replace(NHWC, lower=(-1, -129)).args())
    assert "lower_corner[1] = -129 (H) is outside -128..127" in str(info.value)
    assert "rank-4" in str(info.value)
    with pytest.raises(ValueError) as info:
        validate_im2col(*replace(NDHWC, upper=(-1, -1, 16)).args())
    assert "upper_corner[2] = 16 (D) is outside -16..15" in str(info.value)


def test_bounding_box_message_shows_where_the_box_runs():
    with pytest.raises(ValueError) as info:
        validate_im2col(*replace(NHWC, lower=(-1, 5), upper=(-1, -4)).args())
    message = str(info.value)
    assert "spatial dimension 1 (H) is empty" in message
    assert "from lower_corner[1] = 5 to dims[2] - 1 + upper_corner[1] = 3" in message


def _tiled_args(case: Im2col) -> list:
    """A tiled map over the same tensor (box = channels x 1 x ... x 1)."""
    box = (case.channels,) + (1,) * (case.rank - 1)
    return [case.dtype, case.rank, case.address, *case.dims, *case.strides, *box,
            *case.estrides, case.interleave, case.swizzle, case.l2, case.oob]


@pytest.mark.parametrize(
    "case",
    [
        replace(NHWC, address=0x10004),
        replace(NHWC, dims=(64, 8, 0, 2)),
        replace(NHWC, strides=(128, 1000, 8192)),
        replace(NHWC, estrides=(1, 1, 1, 9)),
        replace(NHWC, swizzle=9),
        replace(NHWC, dtype="float4"),
        replace(NHWC, swizzle=0, channels=4),
        replace(NHWC, swizzle=1, channels=32),
        replace(NHWC, dtype="int16", oob=1),
    ],
    ids=lambda c: f"{c.address:#x}-{c.dims}-{c.strides}-{c.dtype}-{c.swizzle}-{c.channels}",
)
def test_shared_rules_read_as_for_tiled_maps(case):
    """A rule both kinds of map have is the same rule: same name, same message, when the
    im2col inner box (channels_per_pixel) equals the tiled box[0]."""
    with pytest.raises(ValueError) as tiled:
        validate_tiled(*_tiled_args(case))
    with pytest.raises(ValueError) as im2col:
        validate_im2col(*case.args())
    expected = str(tiled.value).replace("box[0]", "channels_per_pixel")
    assert str(im2col.value) == expected


def test_wrong_argument_count_is_a_type_error():
    with pytest.raises(TypeError, match="expected 24 for this rank") as info:
        validate_im2col(*NHWC.args()[:-1])
    assert "lower_corner[rank-2], upper_corner[rank-2], channels_per_pixel" in str(info.value)
    with pytest.raises(TypeError, match="expected 19"):
        validate_im2col(*NWC.args(), 0)
    with pytest.raises(TypeError, match="expected 29"):
        validate_im2col(*NDHWC.args()[:-2])
    with pytest.raises(TypeError, match="expected 23"):
        validate_im2col_static(*NHWC.args())  # the static layout has no address
    with pytest.raises(TypeError, match="expected 25") as info:
        encode_im2col(None, *NHWC.args()[:-1])
    assert "layout is map, dtype, rank, global_address" in str(info.value)


def test_rank_is_checked_before_the_argument_count():
    with pytest.raises(ValueError, match="rule 'im2col-rank': rank 2"):
        validate_im2col("float16", 2)
    with pytest.raises(TypeError, match="argument 1 \\(rank\\) must be an integer"):
        validate_im2col("float16", "4", 0x10000)


@pytest.mark.parametrize(
    "index,what,value",
    [(3, "dims", "64"), (10, "lower_corner", "-1"), (12, "upper_corner", 1.5),
     (14, "channels_per_pixel", True), (15, "pixels_per_column", None),
     (16, "element_strides", "1")],
)
def test_wrong_argument_type_is_a_type_error(index, what, value):
    args = NHWC.args()
    args[index] = value
    with pytest.raises(TypeError, match=f"argument {index} \\({what}\\) must be an integer"):
        validate_im2col(*args)


# ---- the compile-time validator -------------------------------------------------------------

def _static(case: Im2col, **unknown) -> list:
    """The static layout with the named fields (or single elements, ``lower_1=None``) unknown."""
    fields = {
        "dims": list(case.dims), "strides": list(case.strides), "lower": list(case.lower),
        "upper": list(case.upper), "channels": case.channels, "pixels": case.pixels,
        "estrides": list(case.estrides), "interleave": case.interleave,
        "swizzle": case.swizzle, "l2": case.l2, "oob": case.oob,
    }
    for key, value in unknown.items():
        name, _, index = key.rpartition("_")
        if name in fields and index.isdigit():
            fields[name][int(index)] = value
        elif isinstance(fields[key], list):
            fields[key] = [value] * len(fields[key])
        else:
            fields[key] = value
    return [case.dtype, case.rank, *fields["dims"], *fields["strides"], *fields["lower"],
            *fields["upper"], fields["channels"], fields["pixels"], *fields["estrides"],
            fields["interleave"], fields["swizzle"], fields["l2"], fields["oob"]]


def test_static_validator_accepts_all_unknown():
    everything = dict.fromkeys(("dims", "strides", "lower", "upper", "channels", "pixels",
                                "estrides", "interleave", "swizzle", "l2", "oob"))
    assert validate_im2col_static(*_static(NHWC, **everything)) is None
    assert validate_im2col_static(*_static(NDHWC, **everything)) is None


STATIC_CASES = [(c, r, v) for c, r, v in RULE_CASES if r != "global-address-align"]


@pytest.mark.parametrize("case,rule,value", [pytest.param(*c, id=_case_id(c))
                                             for c in STATIC_CASES])
def test_static_validator_catches_known_bad_values(case, rule, value):
    with pytest.raises(ValueError) as info:
        validate_im2col_static(*case.static_args())
    assert f"tvm_tma: rule '{rule}'" in str(info.value)
    assert value in str(info.value)


@pytest.mark.parametrize(
    "case,unknown",
    [
        # the bounding box reads dims[i+1] and both corners of dimension i
        (replace(NHWC, lower=(4, -1), upper=(-4, -1)), {"dims_1": None}),
        (replace(NHWC, lower=(4, -1), upper=(-4, -1)), {"lower_0": None}),
        (replace(NHWC, lower=(4, -1), upper=(-4, -1)), {"upper_0": None}),
        # the inner box rules read channels, interleave and (for the span) swizzle
        (replace(NHWC, swizzle=0, channels=4), {"channels": None}),
        (replace(NHWC, swizzle=0, channels=4), {"interleave": None}),
        (replace(NHWC, channels=128), {"swizzle": None}),
        (replace(NHWC, channels=128), {"channels": None}),
        # each value rule reads its own value only
        (replace(NHWC, channels=0), {"channels": None}),
        (replace(NHWC, pixels=2000), {"pixels": None}),
        (replace(NHWC, lower=(-1, -129)), {"lower_1": None}),
        (replace(NHWC, upper=(128, -1)), {"upper_0": None}),
        (replace(NHWC, dims=(64, 8, 0, 2)), {"dims_2": None}),
        (replace(NHWC, strides=(136, 1024, 8192)), {"strides_0": None}),
        (replace(NHWC, estrides=(1, 9, 1, 1)), {"estrides_1": None}),
        (replace(NHWC, dtype="int32", channels=32, oob=1), {"oob": None}),
    ],
)
def test_static_validator_skips_rules_that_read_unknown_values(case, unknown):
    with pytest.raises(ValueError):
        validate_im2col_static(*case.static_args())
    assert validate_im2col_static(*_static(case, **unknown)) is None


@pytest.mark.parametrize(
    "case,unknown,rule",
    [
        # an unknown dim does not hide a corner outside the rank's range
        (replace(NHWC, lower=(-1, -129)), {"dims": None}, "im2col-corner"),
        # nor unknown corners a bad channel count, nor unknown channels a bad pixel count
        (replace(NHWC, channels=300), {"lower": None, "upper": None}, "im2col-channels"),
        (replace(NHWC, pixels=0), {"channels": None}, "im2col-pixels"),
        # unknown channels still leave the empty bounding box, and unknown swizzle the 16B rows
        (replace(NHWC, lower=(4, -1), upper=(-4, -1)), {"channels": None},
         "im2col-bounding-box"),
        (replace(NHWC, swizzle=0, channels=4), {"swizzle": None}, "inner-box-16B"),
        # an unknown second spatial dim leaves the first one's box checked
        (replace(NHWC, lower=(4, -1), upper=(-4, -1)), {"dims_2": None, "lower_1": None},
         "im2col-bounding-box"),
    ],
)
def test_static_validator_still_checks_what_is_known(case, unknown, rule):
    with pytest.raises(ValueError, match=f"rule '{rule}'"):
        validate_im2col_static(*_static(case, **unknown))


def test_static_validator_refuses_non_integers():
    args = NHWC.static_args()
    args[9] = 1.0  # lower_corner[0]
    with pytest.raises(TypeError, match="lower_corner\\) must be an integer or None"):
        validate_im2col_static(*args)


# ---- encode_im2col without a driver: the rules run first ------------------------------------



def test_encode_rejects_misaligned_address_before_the_driver():
    before = encode_count()
    with pytest.raises(ValueError, match="rule 'global-address-align'") as info:
        encode_im2col(MAP, *NHWC.args(address=ctypes.c_void_p(0x10003)))
    assert "0x10003" in str(info.value)
    assert encode_count() == before


def test_encode_rejects_null_and_negative_maps():
    with pytest.raises(ValueError, match="rule 'map-null'"):
        encode_im2col(None, *NHWC.args())
    with pytest.raises(ValueError, match="rule 'map-null'.*-128"):
        encode_im2col(-128, *NHWC.args())


def test_encode_rejects_negative_address():
    with pytest.raises(ValueError, match="rule 'global-address-align'") as info:
        encode_im2col(MAP, *NHWC.args(address=-4096))
    assert "-4096" in str(info.value)


def test_encode_checks_the_same_rules_as_validate():
    before = encode_count()
    for case, rule, value in RULE_CASES:
        with pytest.raises(ValueError, match=f"rule '{rule}'") as info:
            encode_im2col(MAP, *case.args())
        assert value in str(info.value)
    assert encode_count() == before


@pytest.mark.skipif(driver_available(), reason="needs a machine without a CUDA driver")
def test_encode_without_driver_says_so():
    with pytest.raises(RuntimeError, match="rule 'driver'"):
        encode_im2col(MAP, *NHWC.args())
    assert encode_count() == 0


def test_failed_encodes_are_not_cached():
    misaligned = replace(NHWC, address=0x10003)
    for _ in range(2):
        with pytest.raises(ValueError, match="rule 'global-address-align'"):
            encode_im2col(MAP, *misaligned.args())
    assert tuple(cache_stats()) == (0, 2, 0)


def test_errors_surface_through_generated_host_code():
    """A host PrimFunc calling encode_im2col by name passes the map and address as handles and
    re-raises the runtime's error with its kind and message."""
    tvm = pytest.importorskip("tvm")
    if not tvm.runtime.enabled("llvm"):
        pytest.skip("TVM built without LLVM")
    import numpy as np
    from tvm.script import tirx as T

    @T.prim_func
    def host(A: T.Buffer((2, 8, 8, 64), "float16"), offset: T.int64):
        # fmt: off
        T.evaluate(
            T.call_packed(
                "tvm_tma.encode_im2col", T.tvm_stack_alloca("tensormap", 1), "float16", 4,
                T.address_of(A[0, 0, 0, offset]), T.int64(64), T.int64(8), T.int64(8),
                T.int64(2), T.int64(128), T.int64(1024), T.int64(8192), -1, -1, -1, -1, 64,
                64, 1, 1, 1, 1, 0, 3, 2, 0,
            )
        )
        # fmt: on

    func = tvm.compile(tvm.IRModule({"main": host}), target="llvm")["main"]
    a = tvm.runtime.tensor(np.zeros((2, 8, 8, 64), "float16"))
    with pytest.raises(ValueError, match="rule 'global-address-align'"):
        func(a, 1)
    if not driver_available():
        with pytest.raises(RuntimeError, match="rule 'driver'"):
            func(a, 0)
    else:  # a host buffer is not device memory
        with pytest.raises(ValueError, match="rule 'global-address'"):
            func(a, 0)


# ---- a stand-in driver: the cache and the driver call without a GPU -------------------------

FAKE_LIBCUDA_C = r"""
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_calls = 0;

static void record(const char* fmt, ...) {
  const char* path = getenv("FAKE_CUDA_LOG");
  if (path == NULL) return;
  FILE* f = fopen(path, "a");
  if (f == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fclose(f);
}

static void record_u64(const char* name, const uint64_t* v, unsigned n) {
  record(" %s=", name);
  for (unsigned i = 0; i < n; ++i) record("%s%llu", i ? "," : "", (unsigned long long)v[i]);
}

static void record_u32(const char* name, const uint32_t* v, unsigned n) {
  record(" %s=", name);
  for (unsigned i = 0; i < n; ++i) record("%s%u", i ? "," : "", v[i]);
}

static void record_int(const char* name, const int* v, unsigned n) {
  record(" %s=", name);
  for (unsigned i = 0; i < n; ++i) record("%s%d", i ? "," : "", v[i]);
}

static int fail_requested(void) {
  const char* fail = getenv("FAKE_CUDA_FAIL");
  return fail != NULL && fail[0] == '1';
}

/* The map says which entry point made it, on which call, for which address. */
static void fill(void* map, char tag, void* address) {
  unsigned char* bytes = (unsigned char*)map;
  memset(bytes, 0, 128);
  bytes[0] = (unsigned char)tag;
  ++g_calls;
  memcpy(bytes + 8, &g_calls, sizeof g_calls);
  memcpy(bytes + 16, &address, sizeof address);
}

int cuInit(unsigned int flags) {
  (void)flags;
  return 0;
}

int cuGetErrorName(int error, const char** name) {
  *name = error == 1 ? "CUDA_ERROR_INVALID_VALUE" : error == 500 ? "CUDA_ERROR_NOT_FOUND" : "?";
  return 0;
}

int cuTensorMapEncodeTiled(void* map, int dtype, uint32_t rank, void* address,
                           const uint64_t* dims, const uint64_t* strides, const uint32_t* box,
                           const uint32_t* element_strides, int interleave, int swizzle,
                           int l2_promotion, int oob_fill) {
  record("tiled dtype=%d rank=%u address=%llu", dtype, rank, (unsigned long long)address);
  record_u64("dims", dims, rank);
  record_u64("strides", strides, rank - 1);
  record_u32("box", box, rank);
  record_u32("element_strides", element_strides, rank);
  record(" interleave=%d swizzle=%d l2_promotion=%d oob_fill=%d\n", interleave, swizzle,
         l2_promotion, oob_fill);
  if (fail_requested()) return 1;
  fill(map, 'T', address);
  return 0;
}

#ifndef FAKE_WITHOUT_IM2COL
int cuTensorMapEncodeIm2col(void* map, int dtype, uint32_t rank, void* address,
                            const uint64_t* dims, const uint64_t* strides, const int* lower,
                            const int* upper, uint32_t channels, uint32_t pixels,
                            const uint32_t* element_strides, int interleave, int swizzle,
                            int l2_promotion, int oob_fill) {
  record("im2col dtype=%d rank=%u address=%llu", dtype, rank, (unsigned long long)address);
  record_u64("dims", dims, rank);
  record_u64("strides", strides, rank - 1);
  record_int("lower", lower, rank - 2);
  record_int("upper", upper, rank - 2);
  record(" channels=%u pixels=%u", channels, pixels);
  record_u32("element_strides", element_strides, rank);
  record(" interleave=%d swizzle=%d l2_promotion=%d oob_fill=%d\n", interleave, swizzle,
         l2_promotion, oob_fill);
  if (fail_requested()) return 1;
  fill(map, 'I', address);
  return 0;
}
#endif

/* One device allocation, FAKE_CUDA_ALLOC="base:size"; any other address is not CUDA memory. */
int cuMemGetAddressRange_v2(unsigned long long* base, size_t* size, unsigned long long ptr) {
  const char* spec = getenv("FAKE_CUDA_ALLOC");
  unsigned long long b = 0, s = 0;
  if (spec == NULL || sscanf(spec, "%llu:%llu", &b, &s) != 2) return 500;
  if (ptr < b || ptr >= b + s) return 500;
  if (base != NULL) *base = b;
  if (size != NULL) *size = s;
  return 0;
}
"""

# Runs in the subprocess. Only tvm_ffi and the runtime library are loaded (importing tvm_tma
# would import tvm, whose CUDA runtime links libcuda.so.1 and would bind to the stand-in).
FAKE_PRELUDE = r"""
import ctypes, json, os, sys
import tvm_ffi
tvm_ffi.load_module(sys.argv[1])
ARGS = json.loads(sys.argv[2])
g = tvm_ffi.get_global_func
encode_im2col = g("tvm_tma.encode_im2col")
encode_tiled = g("tvm_tma.encode_tiled")
encode_count = g("tvm_tma.encode_count")
cache_stats = lambda: list(g("tvm_tma.descriptor_cache_stats")())
cache_enable = g("tvm_tma.descriptor_cache_enable")
assert g("tvm_tma.driver_available")(), g("tvm_tma.driver_error")()
_storage = (ctypes.c_uint8 * 256)()
MAP = ctypes.c_void_p((ctypes.addressof(_storage) + 127) // 128 * 128)

def encoded(fn, args):
    ctypes.memset(MAP, 0xAB, 128)
    fn(MAP, *args)
    return ctypes.string_at(MAP, 128).hex()

def refusal(fn, args):
    try:
        fn(MAP, *args)
    except Exception as err:
        return [type(err).__name__, str(err)]
    return None

out = {}
"""

#: Where the stand-in allocation lies (the NHWC map's address) and how large it is.
FAKE_BASE = NHWC.address
FAKE_SIZE = 1 << 20


def _build_fake(directory, *flags) -> str:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in libcuda.so.1")
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "fake_libcuda.c"
    source.write_text(FAKE_LIBCUDA_C)
    built = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", *flags, "-o", str(directory / "libcuda.so.1"),
         str(source)],
        capture_output=True, text=True,
    )
    if built.returncode != 0:
        pytest.skip(f"cannot build the stand-in libcuda.so.1: {built.stderr}")
    return str(directory)


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    return _build_fake(tmp_path_factory.mktemp("fake_cuda"))


@pytest.fixture(scope="module")
def fake_driver_without_im2col(tmp_path_factory):
    return _build_fake(tmp_path_factory.mktemp("fake_cuda_old"), "-DFAKE_WITHOUT_IM2COL")


def run_on_fake(driver_dir, tmp_path, body: str, args: dict, *, alloc=(FAKE_BASE, FAKE_SIZE),
                fail=False):
    """Run ``body`` in a subprocess whose libcuda.so.1 is the stand-in; return (out, log)
    where ``out`` is the dict the body filled and ``log`` the driver calls it made."""
    log = tmp_path / "driver.log"
    if log.exists():
        log.unlink()
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (driver_dir, env.get("LD_LIBRARY_PATH")) if p)
    env["FAKE_CUDA_LOG"] = str(log)
    env["FAKE_CUDA_ALLOC"] = f"{alloc[0]}:{alloc[1]}"
    env["FAKE_CUDA_FAIL"] = "1" if fail else "0"
    script = FAKE_PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    proc = subprocess.run(
        [sys.executable, "-c", script, LIBRARY, json.dumps(args)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    calls = log.read_text().splitlines() if log.exists() else []
    return out, calls


def _plain(case: Im2col) -> list:
    return case.args()


def test_fake_driver_receives_the_arguments_in_driver_order(fake_driver, tmp_path):
    case = replace(NDHWC, dtype="bfloat16", lower=(-1, -2, -3), upper=(1, 2, 3), pixels=32,
                   estrides=(1, 2, 1, 3, 1), oob=1, l2=3)
    out, calls = run_on_fake(fake_driver, tmp_path, """
        map_hex = encoded(encode_im2col, ARGS["case"])
        out["tag"] = map_hex[:2]
        out["count"] = encode_count()
    """, {"case": _plain(case)})
    assert out == {"tag": "49", "count": 1}  # 'I': cuTensorMapEncodeIm2col wrote the map
    assert calls == [
        f"im2col dtype=9 rank=5 address={FAKE_BASE} dims=64,4,4,4,2 strides=128,512,2048,8192"
        " lower=-1,-2,-3 upper=1,2,3 channels=64 pixels=32 element_strides=1,2,1,3,1"
        " interleave=0 swizzle=3 l2_promotion=3 oob_fill=1"
    ]


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_fake_driver_gets_rank_minus_two_corners(fake_driver, tmp_path, rank):
    case = BY_RANK[rank]
    _, calls = run_on_fake(fake_driver, tmp_path, """
        encoded(encode_im2col, ARGS["case"])
    """, {"case": _plain(case)})
    corners = ",".join(["-1"] * (rank - 2))
    assert f" lower={corners} upper={corners} " in calls[0]
    assert f"dtype={DTYPE_CODES[case.dtype]} rank={rank} " in calls[0]


def test_same_arguments_encode_once(fake_driver, tmp_path):
    out, calls = run_on_fake(fake_driver, tmp_path, """
        first = encoded(encode_im2col, ARGS["case"])
        again = encoded(encode_im2col, ARGS["case"])
        out.update(first=first, again=again, count=encode_count(), stats=cache_stats())
    """, {"case": _plain(NHWC)})
    assert len(calls) == 1
    assert out["count"] == 1
    assert out["again"] == out["first"] and out["first"].startswith("49")
    assert out["stats"] == [1, 1, 1]


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(replace(NHWC, lower=(-1, 0)), id="lower-corner"),
        pytest.param(replace(NHWC, upper=(0, -1)), id="upper-corner"),
        pytest.param(replace(NHWC, lower=(-2, -2), upper=(-2, -2)), id="both-corners"),
        pytest.param(replace(NHWC, channels=32), id="channels"),
        pytest.param(replace(NHWC, pixels=128), id="pixels"),
        pytest.param(replace(NHWC, estrides=(1, 2, 2, 1)), id="traversal-strides"),
        pytest.param(replace(NHWC, address=NHWC.address + 256), id="address"),
        pytest.param(replace(NHWC, dims=(64, 8, 4, 2)), id="dims"),
        pytest.param(replace(NHWC, swizzle=0), id="swizzle"),
    ],
)
def test_different_arguments_encode_again(fake_driver, tmp_path, changed):
    out, calls = run_on_fake(fake_driver, tmp_path, """
        first = encoded(encode_im2col, ARGS["base"])
        second = encoded(encode_im2col, ARGS["changed"])
        first_again = encoded(encode_im2col, ARGS["base"])
        out.update(first=first, second=second, first_again=first_again, count=encode_count(),
                   stats=cache_stats())
    """, {"base": _plain(NHWC), "changed": _plain(changed)})
    assert out["count"] == 2 and len(calls) == 2
    assert out["second"] != out["first"]
    assert out["first_again"] == out["first"]
    assert out["stats"] == [1, 2, 2]


def test_tiled_and_im2col_maps_are_cached_apart(fake_driver, tmp_path):
    """Over the same memory, with the same dims, strides, element strides and enums, a tiled
    map and an im2col map are two maps: two encodes, two entries, and a hit of each kind
    replays its own kind's bytes."""
    out, calls = run_on_fake(fake_driver, tmp_path, """
        im2col = encoded(encode_im2col, ARGS["im2col"])
        tiled = encoded(encode_tiled, ARGS["tiled"])
        out["after_both"] = cache_stats()
        out["tiled_again"] = encoded(encode_tiled, ARGS["tiled"]) == tiled
        out["im2col_again"] = encoded(encode_im2col, ARGS["im2col"]) == im2col
        out.update(im2col=im2col[:2], tiled=tiled[:2], count=encode_count(), stats=cache_stats())
    """, {"im2col": _plain(NHWC), "tiled": _tiled_args(NHWC)})
    assert [c.split()[0] for c in calls] == ["im2col", "tiled"]
    assert out["after_both"] == [0, 2, 2]
    assert (out["im2col"], out["tiled"]) == ("49", "54")  # 'I', 'T'
    assert out["tiled_again"] and out["im2col_again"]
    assert out["count"] == 2
    assert out["stats"] == [2, 2, 2]


def test_disabled_cache_encodes_every_time(fake_driver, tmp_path):
    out, calls = run_on_fake(fake_driver, tmp_path, """
        cache_enable(False)
        maps = [encoded(encode_im2col, ARGS["case"]) for _ in range(3)]
        out.update(count=encode_count(), stats=cache_stats(), distinct=len(set(maps)))
    """, {"case": _plain(NHWC)})
    assert len(calls) == 3 and out["count"] == 3
    assert out["distinct"] == 3  # each one a fresh driver encode
    assert out["stats"][2] == 0


def test_footprint_is_checked_against_the_allocation(fake_driver, tmp_path):
    exact = NHWC.nbytes
    too_big = replace(NHWC, dims=(64, 8, 8, 3))
    outside = replace(NHWC, address=FAKE_BASE + (1 << 24))
    out, calls = run_on_fake(fake_driver, tmp_path, """
        out["fits"] = refusal(encode_im2col, ARGS["fits"])
        out["too_big"] = refusal(encode_im2col, ARGS["too_big"])
        out["outside"] = refusal(encode_im2col, ARGS["outside"])
        out["stats"] = cache_stats()
        # the allocation goes away: a cache hit must still be refused
        os.environ["FAKE_CUDA_ALLOC"] = "1:16"
        out["freed"] = refusal(encode_im2col, ARGS["fits"])
        out["count"] = encode_count()
    """, {"fits": _plain(NHWC), "too_big": _plain(too_big), "outside": _plain(outside)},
        alloc=(FAKE_BASE, exact))
    assert out["fits"] is None
    kind, message = out["too_big"]
    assert kind == "ValueError" and "rule 'global-footprint'" in message
    assert f"({exact} bytes)" in message and "im2col dtype=float16" in message
    kind, message = out["outside"]
    assert kind == "ValueError" and "rule 'global-address'" in message
    assert "CUDA_ERROR_NOT_FOUND" in message
    assert out["stats"] == [0, 3, 1]
    kind, message = out["freed"]
    assert kind == "ValueError" and "rule 'global-address'" in message
    assert out["count"] == 1 and len(calls) == 1


def test_driver_failure_names_the_im2col_encode(fake_driver, tmp_path):
    out, calls = run_on_fake(fake_driver, tmp_path, """
        out["error"] = refusal(encode_im2col, ARGS["case"])
        out["stats"] = cache_stats()
        out["count"] = encode_count()
    """, {"case": _plain(NHWC)}, fail=True)
    kind, message = out["error"]
    assert kind == "RuntimeError"
    assert "rule 'driver': cuTensorMapEncodeIm2col returned CUDA_ERROR_INVALID_VALUE (1)" in message
    assert "lower_corner=[-1, -1] upper_corner=[-1, -1] channels_per_pixel=64" in message
    assert out["stats"] == [0, 1, 0] and out["count"] == 0
    assert len(calls) == 1


def test_driver_without_the_im2col_entry_point(fake_driver_without_im2col, tmp_path):
    """Tiled maps still encode; an im2col encode is refused with rule 'driver'."""
    out, calls = run_on_fake(fake_driver_without_im2col, tmp_path, """
        out["tiled"] = refusal(encode_tiled, ARGS["tiled"])
        out["im2col"] = refusal(encode_im2col, ARGS["im2col"])
        out["stats"] = cache_stats()
    """, {"tiled": _tiled_args(NHWC), "im2col": _plain(NHWC)})
    assert out["tiled"] is None
    kind, message = out["im2col"]
    assert kind == "RuntimeError" and "rule 'driver'" in message
    assert "cuTensorMapEncodeIm2col" in message
    assert out["stats"][2] == 1
    assert [c.split()[0] for c in calls] == ["tiled"]


# ---- the real driver (GPU machines) ---------------------------------------------------------


def _encoded(case: Im2col, address: int) -> bytes:
    ctypes.memset(MAP, 0, 128)
    encode_im2col(MAP, *case.args(address=ctypes.c_void_p(address)))
    return ctypes.string_at(MAP, 128)


@needs_driver
def test_encode_nhwc_map_on_device():
    """A real im2col map over an NHWC float16 tensor: 128 bytes come back, and a second
    (uncached) encode of the same arguments gives the same 128 bytes."""
    buf = cuda_tensor(NHWC.nbytes)
    cache_enable(False)
    before = encode_count()
    first = _encoded(NHWC, buf.data_ptr())
    second = _encoded(NHWC, buf.data_ptr())
    assert encode_count() == before + 2
    assert any(first), "the encoded map was not copied out"
    assert second == first


@needs_driver
def test_repeated_encode_on_device_is_served_from_the_cache():
    buf = cuda_tensor(NHWC.nbytes)
    before = encode_count()
    first = _encoded(NHWC, buf.data_ptr())
    again = _encoded(NHWC, buf.data_ptr())
    assert encode_count() == before + 1
    assert again == first and any(first)
    assert tuple(cache_stats()) == (1, 1, 1)
    other = _encoded(replace(NHWC, lower=(0, 0), upper=(-2, -2)), buf.data_ptr())
    assert encode_count() == before + 2
    assert other != first


@needs_driver
@pytest.mark.parametrize("swizzle", [0, 1, 2, 3])
@pytest.mark.parametrize("rank", [3, 4, 5])
def test_encode_each_rank_on_device(rank, swizzle):
    case = replace(BY_RANK[rank], swizzle=swizzle, channels=CHANNELS_FOR_SWIZZLE[swizzle])
    buf = cuda_tensor(case.nbytes)
    assert any(_encoded(case, buf.data_ptr()))


@needs_driver
def test_encode_rejects_footprint_outside_the_allocation_on_device():
    buf = cuda_tensor(NHWC.nbytes)
    too_big = replace(NHWC, dims=(64, 8, 8, 3))
    before = encode_count()
    with pytest.raises(ValueError, match="rule 'global-footprint'") as info:
        _encoded(too_big, buf.data_ptr())
    assert hex(buf.data_ptr()) in str(info.value)
    assert encode_count() == before


# The driver's own verdict on the rule cases. Left out: dtype names (the driver sees an enum),
# the null address (whether the driver refuses null is not the rule's point) and the negative
# values that cannot be passed to it unchanged.
_NOT_ASKED = {"dtype"}


def _driver_verdict(libcuda, case: Im2col, base: int) -> int:
    """cuTensorMapEncodeIm2col's result for ``case``, its address moved onto ``base`` (a
    device allocation; alignment kept)."""
    rank = case.rank
    map_storage = (ctypes.c_uint8 * 256)()
    tensor_map = ctypes.c_void_p((ctypes.addressof(map_storage) + 127) // 128 * 128)
    u64 = ctypes.c_uint64
    dims = (u64 * 5)(*[d & (2**64 - 1) for d in case.dims])
    strides = (u64 * 4)(*[s & (2**64 - 1) for s in case.strides])
    lower = (ctypes.c_int * 3)(*case.lower)
    upper = (ctypes.c_int * 3)(*case.upper)
    estrides = (ctypes.c_uint32 * 5)(*[e & 0xFFFFFFFF for e in case.estrides])
    fn = libcuda.cuTensorMapEncodeIm2col
    fn.restype = ctypes.c_int
    return fn(
        tensor_map, ctypes.c_int(DTYPE_CODES[case.dtype]), ctypes.c_uint32(rank),
        ctypes.c_void_p(base + int(case.address) - 0x10000), dims, strides, lower, upper,
        ctypes.c_uint32(case.channels & 0xFFFFFFFF), ctypes.c_uint32(case.pixels & 0xFFFFFFFF),
        estrides, ctypes.c_int(case.interleave), ctypes.c_int(case.swizzle),
        ctypes.c_int(case.l2), ctypes.c_int(case.oob),
    )


def _askable(case: Im2col, rule: str) -> bool:
    if rule in _NOT_ASKED or not 0 <= case.rank <= 5 or case.address == 0:
        return False
    return all(-(2**31) <= c < 2**31 for c in (*case.lower, *case.upper))


@needs_driver
def test_the_driver_agrees_with_the_rules():
    """Every good map encodes on the real driver and every refused one (that can be put to
    the driver) is refused by it too: the rules are neither looser nor stricter than
    cuTensorMapEncodeIm2col. A failure lists each disagreement."""
    buf = cuda_tensor(1 << 20)  # also makes a context current on this thread
    base = buf.data_ptr()
    libcuda = ctypes.CDLL("libcuda.so.1")
    disagreements = []
    goods = [p.values[0] for p in VALID] + [
        replace(BY_RANK[r], swizzle=s, channels=CHANNELS_FOR_SWIZZLE[s])
        for r in (3, 4, 5) for s in (0, 1, 2, 3)
    ]
    for case in goods:
        if isinstance(case.address, ctypes.c_void_p):
            case = replace(case, address=case.address.value)
        rc = _driver_verdict(libcuda, case, base)
        if rc != 0:
            disagreements.append(f"driver refused (CUresult {rc}) a map the rules accept: {case}")
    for case, rule, value in RULE_CASES:
        if not _askable(case, rule):
            continue
        rc = _driver_verdict(libcuda, case, base)
        if rc == 0:
            disagreements.append(f"driver accepted what rule '{rule}' refuses ({value}): {case}")
    assert not disagreements, "\n".join(disagreements)
