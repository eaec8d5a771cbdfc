"""Device-side descriptor rebind: tensormap.replace mutators and tensormap proxy fences.

Only the global address, the global dims and the global strides of a tiled map can change
on the device (seed 000): box, swizzle, element type, interleave, fill, rank and element
strides are host-born. A rebind is fixed in order: acquire fence, address, dims[0..rank),
strides[1..rank), release fence -- 2 * rank mutators between two fences.
"""

from __future__ import annotations

from collections.abc import Sequence

import tvm
from tvm.script import tirx as T

from .asm import Instruction
from .errors import IntrinError
from .operands import (
    pointer_space,
    require_int,
    require_pointer,
    require_sequence,
    require_static_int,
)
from .registry import Family, Rendered, define, straight

SCOPES = ("cta", "cluster", "gpu", "sys")
SPACES = ("global", "shared::cta")
MUTABLE_FIELDS = ("global_address", "global_dim", "global_stride")
HOST_BORN_FIELDS = ("box_dim", "element_stride", "elemtype", "swizzle_mode", "swizzle",
                    "interleave_layout", "interleave", "fill_mode", "rank", "swizzle_atomicity")
MUTATOR_FLOOR = (90, "a")  # tensormap.replace / cp_fenceproxy: sm_90a, PTX ISA 8.3


def _space_of(desc, space: str | None) -> str:
    """The descriptor's state space: given, or read off the pointer (shared -> shared::cta)."""
    seen = pointer_space(desc)
    if seen == "param":
        raise IntrinError("operand-space", f"descriptor {desc} is a kernel parameter "
                          "(__grid_constant__, read-only); copy it to shared::cta or global "
                          "memory before mutating it")
    inferred = {"shared": "shared::cta", "global": "global"}.get(seen or "", None)
    if space is None:
        if inferred is None:
            raise IntrinError("operand-space", f"cannot tell whether descriptor {desc} is in "
                              "global or shared::cta memory; pass space=")
        return inferred
    if not isinstance(space, str) or space not in SPACES:
        raise IntrinError("operand-space", f"descriptor space {space!r} is not one of {SPACES}")
    if inferred is not None and inferred != space:
        raise IntrinError("operand-space", f"descriptor {desc} is in {inferred} memory, not "
                          f"{space}")
    return space


def _desc_kind(space: str) -> str:
    return "smem" if space == "shared::cta" else "gaddr"


def _check_scope(scope: str) -> None:
    if not isinstance(scope, str) or scope not in SCOPES:
        raise IntrinError("scope", f"scope {scope!r} is not one of {', '.join(SCOPES)}")


def _check_ord(name: str, index: int, rank: int, low: int) -> None:
    if not 1 <= rank <= 5:
        raise IntrinError("rank", f"descriptor rank must be 1..5, got {rank}")
    if not low <= index < rank:
        raise IntrinError("ord", f"{name} dimension {index} is outside [{low}, {rank}) for a "
                          f"rank-{rank} descriptor")


def _address_template(space: str) -> str:
    return f"tensormap.replace.tile.global_address.{space}.b1024.b64 [%0], %1;"


def _dim_template(space: str, ord_: int) -> str:
    return f"tensormap.replace.tile.global_dim.{space}.b1024.b32 [%0], {ord_}, %1;"


def _stride_template(space: str, ord_: int) -> str:
    return f"tensormap.replace.tile.global_stride.{space}.b1024.b64 [%0], {ord_}, %1;"


def _two_operands(what: str):
    def check(spec: dict, operands: Sequence) -> None:
        if len(operands) != 2:
            raise IntrinError("spec", f"{what} takes (descriptor, value), got {len(operands)}")
        if "dim" in spec:
            if what == "replace_stride" and spec["dim"] == 0:
                raise IntrinError("stride-dim0", "dimension 0's stride is the element size; "
                                  "it is fixed when the map is encoded and cannot be replaced")
            low = 1 if what == "replace_stride" else 0
            _check_ord(what, spec["dim"], spec["rank"], low)
        if pointer_space(operands[0]) == "param":
            raise IntrinError("operand-space", f"descriptor {operands[0]} is a read-only "
                              "kernel parameter")

    return check


REPLACE_ADDRESS = define(Family(
    "replace_address", {"space": str},
    lambda spec: straight([_desc_kind(spec["space"]), "u64"], _address_template(spec["space"])),
    _two_operands("replace_address"), lambda spec: MUTATOR_FLOOR))
REPLACE_DIM = define(Family(
    "replace_dim", {"space": str, "dim": int, "rank": int},
    lambda spec: straight([_desc_kind(spec["space"]), "u32"],
                          _dim_template(spec["space"], spec["dim"])),
    _two_operands("replace_dim"), lambda spec: MUTATOR_FLOOR))
REPLACE_STRIDE = define(Family(
    "replace_stride", {"space": str, "dim": int, "rank": int},
    lambda spec: straight([_desc_kind(spec["space"]), "u64"],
                          _stride_template(spec["space"], spec["dim"] - 1)),
    _two_operands("replace_stride"), lambda spec: MUTATOR_FLOOR))


def _descriptor(desc, family: str):
    """A descriptor operand: a pointer or a 64-bit address (never a constant)."""
    return require_pointer(desc, f"{family} descriptor")


def _address(address, family: str):
    """A new global base address: a 64-bit integer (``T.reinterpret("uint64", ptr)``)."""
    address = require_int(address, f"{family} address", 64, exact=True, low=0,
                          note=" (a global address, e.g. T.reinterpret(\"uint64\", ptr))")
    return tvm.tirx.const(address, "uint64") if isinstance(address, int) else \
        T.cast(address, "uint64")


def _extent(extent, what: str):
    """A global dim: a ``.b32`` operand, an integer of at most 32 bits."""
    extent = require_int(extent, what, 32, low=0, high=0xFFFFFFFF)
    return T.cast(extent, "uint32")


def _stride(stride, what: str):
    """A global byte stride: a ``.b64`` operand, an integer of at most 64 bits."""
    stride = require_int(stride, what, 64, low=0)
    return tvm.tirx.const(stride, "uint64") if isinstance(stride, int) else \
        T.cast(stride, "uint64")


def replace_address(desc, address, *, space: str | None = None, arch: str | None = None):
    """Point the descriptor at a new global base (16-byte aligned at run time)."""
    desc = _descriptor(desc, "replace_address")
    return REPLACE_ADDRESS.call({"space": _space_of(desc, space)},
                                [desc, _address(address, "replace_address")], arch)


def replace_dim(desc, dim: int, extent, *, rank: int, space: str | None = None,
                arch: str | None = None):
    """Set global dimension ``dim`` (0 = innermost) of a rank-``rank`` descriptor."""
    dim = require_static_int(dim, "replace_dim dim")
    rank = require_static_int(rank, "replace_dim rank")
    _check_ord("replace_dim", dim, rank, 0)
    desc = _descriptor(desc, "replace_dim")
    return REPLACE_DIM.call({"space": _space_of(desc, space), "dim": dim, "rank": rank},
                            [desc, _extent(extent, "replace_dim extent")], arch)


def replace_stride(desc, dim: int, stride_bytes, *, rank: int, space: str | None = None,
                   arch: str | None = None):
    """Set the byte stride of dimension ``dim`` (1..rank-1; PTX ord ``dim - 1``)."""
    dim = require_static_int(dim, "replace_stride dim")
    rank = require_static_int(rank, "replace_stride rank")
    if dim == 0:
        raise IntrinError("stride-dim0", "dimension 0's stride is the element size; it is "
                          "fixed when the map is encoded and cannot be replaced")
    _check_ord("replace_stride", dim, rank, 1)
    desc = _descriptor(desc, "replace_stride")
    return REPLACE_STRIDE.call({"space": _space_of(desc, space), "dim": dim, "rank": rank},
                               [desc, _stride(stride_bytes, "replace_stride stride_bytes")],
                               arch)


def replace(desc, field: str, *args, **kwargs):
    """Generic mutator entry: only the device-mutable fields are accepted."""
    if not isinstance(field, str):
        raise IntrinError("not-device-mutable", f"descriptor field {field!r} is not a field "
                          f"name (only {', '.join(MUTABLE_FIELDS)} are device-mutable)")
    if field in HOST_BORN_FIELDS or field not in MUTABLE_FIELDS:
        raise IntrinError("not-device-mutable", f"descriptor field {field!r} is not "
                          f"device-mutable (only {', '.join(MUTABLE_FIELDS)}); re-encode the "
                          "map on the host")
    builder = {"global_address": replace_address, "global_dim": replace_dim,
               "global_stride": replace_stride}[field]
    return builder(desc, *args, **kwargs)


# ---- fences ---------------------------------------------------------------------------

def _fence_check(count: int):
    def check(spec: dict, operands: Sequence) -> None:
        _check_scope(spec["scope"])
        if len(operands) != count:
            raise IntrinError("spec", f"fence takes {count} operand(s), got {len(operands)}")

    return check


FENCE_ACQUIRE = define(Family(
    "fence_acquire", {"scope": str},
    lambda spec: straight(["gaddr"],
                          f"fence.proxy.tensormap::generic.acquire.{spec['scope']} [%0], 128;"),
    _fence_check(1), lambda spec: (90, "")))
FENCE_RELEASE = define(Family(
    "fence_release", {"scope": str},
    lambda spec: straight([], f"fence.proxy.tensormap::generic.release.{spec['scope']};"),
    _fence_check(0), lambda spec: (90, "")))


def fence_acquire(desc, scope: str = "gpu", arch: str | None = None):
    """Order earlier generic-proxy writes of ``desc`` before tensormap-proxy reads."""
    _check_scope(scope)
    desc = _descriptor(desc, "fence_acquire")
    return FENCE_ACQUIRE.call({"scope": scope}, [desc], arch)


def fence_release(scope: str = "gpu", arch: str | None = None):
    _check_scope(scope)
    return FENCE_RELEASE.call({"scope": scope}, [], arch)


def _cp_fenceproxy_check(spec: dict, operands: Sequence) -> None:
    _check_scope(spec["scope"])
    if len(operands) != 2:
        raise IntrinError("spec", f"cp_fenceproxy takes (global dst, shared src), got "
                          f"{len(operands)}")
    if pointer_space(operands[0]) in ("shared", "param"):
        raise IntrinError("operand-space", f"cp_fenceproxy writes a global descriptor, got "
                          f"a {pointer_space(operands[0])} pointer ({operands[0]})")
    if pointer_space(operands[1]) not in (None, "shared"):
        raise IntrinError("operand-space", f"cp_fenceproxy reads a shared::cta descriptor, "
                          f"got a {pointer_space(operands[1])} pointer ({operands[1]})")


CP_FENCEPROXY = define(Family(
    "cp_fenceproxy", {"scope": str},
    lambda spec: straight(["gaddr", "smem"],
                          "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic"
                          f".release.{spec['scope']}.sync.aligned [%0], [%1], 128;"),
    _cp_fenceproxy_check, lambda spec: MUTATOR_FLOOR))


def cp_fenceproxy(dst_global_desc, src_shared_desc, scope: str = "gpu",
                  arch: str | None = None):
    """Copy a 128-byte descriptor shared::cta -> global and release it to the tensormap proxy.

    ``.sync.aligned``: every thread of the warp must execute it together.
    """
    _check_scope(scope)
    dst = require_pointer(dst_global_desc, "cp_fenceproxy dst_global_desc (the global "
                          "descriptor)")
    src = require_pointer(src_shared_desc, "cp_fenceproxy src_shared_desc (the shared::cta "
                          "descriptor)")
    return CP_FENCEPROXY.call({"scope": scope}, [dst, src], arch)


# ---- seed --------------------------------------------------------------------------------

#: Bytes of a tensor-map object as the mutators address it (``.b1024``): the 64 live bytes
#: and the reserved half, copied whole so a slot never keeps a previous map's padding.
MAP_OBJECT_BYTES = 128


def _seed_render(spec: dict) -> Rendered:
    # Eight 16-byte generic loads from the template and stores to the slot, in a scoped
    # block of its own two registers (the template is a __grid_constant__ parameter, read
    # through its generic address).
    moves = " ".join(f"ld.v2.b64 {{lo, hi}}, [%1+{offset}]; "
                     f"st.global.v2.b64 [%0+{offset}], {{lo, hi}};"
                     for offset in range(0, spec["bytes"], 16))
    return straight(["gaddr", "gaddr"], "{ .reg .b64 lo, hi; " + moves + " }")


def _seed_check(spec: dict, operands: Sequence) -> None:
    if spec["bytes"] != MAP_OBJECT_BYTES:
        raise IntrinError("spec", f"seed copies a {MAP_OBJECT_BYTES}-byte map object, not "
                          f"{spec['bytes']} bytes")
    if len(operands) != 2:
        raise IntrinError("spec", f"seed takes (global slot, template map), got "
                          f"{len(operands)}")
    if pointer_space(operands[0]) in ("shared", "param"):
        raise IntrinError("operand-space", f"seed writes a global slot, got a "
                          f"{pointer_space(operands[0])} pointer ({operands[0]})")


SEED = define(Family("seed", {"bytes": int}, _seed_render, _seed_check, lambda spec: (90, "")))


def seed(slot, template, arch: str | None = None):
    """Copy the 128-byte map object ``template`` (a host-born map, e.g. the
    ``__grid_constant__`` parameter ``T.address_of(map)``) into the global ``slot`` with
    generic loads and stores: the first step of a device-born map, before the
    :func:`rebind` that retargets it (its fences order these stores too)."""
    slot = require_pointer(slot, "seed slot (a global tensor-map slot)")
    template = require_pointer(template, "seed template", tensor_map=True)
    return SEED.call({"bytes": MAP_OBJECT_BYTES}, [slot, template], arch)


# ---- rebind -----------------------------------------------------------------------------

def _rebind_render(spec: dict) -> Rendered:
    rank, space, scope = spec["rank"], spec["space"], spec["scope"]
    desc = _desc_kind(space)
    # helper params: 0 desc (generic, for the fences), 1 desc (as the mutators address it),
    # 2 address, 3.. dims, then strides of dims 1..rank-1.
    kinds = ("gaddr", desc, "u64", *(["u32"] * rank), *(["u64"] * (rank - 1)))
    instructions = [Instruction(f"fence.proxy.tensormap::generic.acquire.{scope} [%0], 128;",
                                ("gaddr",))]
    routes = [(0,)]
    instructions.append(Instruction(_address_template(space), (desc, "u64")))
    routes.append((1, 2))
    for dim in range(rank):
        instructions.append(Instruction(_dim_template(space, dim), (desc, "u32")))
        routes.append((1, 3 + dim))
    for dim in range(1, rank):
        instructions.append(Instruction(_stride_template(space, dim - 1), (desc, "u64")))
        routes.append((1, 3 + rank + dim - 1))
    instructions.append(Instruction(f"fence.proxy.tensormap::generic.release.{scope};", ()))
    routes.append(())
    arguments = (0, 0, *range(1, 2 * rank + 1))
    return Rendered(tuple(instructions), kinds, tuple(routes), arguments)


def _rebind_check(spec: dict, operands: Sequence) -> None:
    rank = spec["rank"]
    _check_scope(spec["scope"])
    if operands and pointer_space(operands[0]) == "param":
        raise IntrinError("operand-space", f"descriptor {operands[0]} is a read-only kernel "
                          "parameter; rebind a copy in shared::cta or global memory")
    if not 1 <= rank <= 5:
        raise IntrinError("rank", f"descriptor rank must be 1..5, got {rank}")
    if len(operands) != 2 * rank + 1:
        raise IntrinError("spec", f"rebind of rank {rank} takes descriptor, address, {rank} "
                          f"dims and {rank - 1} strides ({2 * rank + 1} operands), got "
                          f"{len(operands)}")


REBIND = define(Family("rebind", {"rank": int, "space": str, "scope": str},
                       _rebind_render, _rebind_check, lambda spec: MUTATOR_FLOOR))


def rebind(desc, address, dims: Sequence, strides: Sequence, *, scope: str = "gpu",
           space: str | None = None, arch: str | None = None):
    """Retarget a tiled descriptor: acquire, address, dims[0..r), strides[1..r), release.

    ``dims`` are the ``rank`` global dims (innermost first); ``strides`` the ``rank - 1``
    byte strides of dims 1..rank-1 -- the same order as the host encode.
    """
    dims = require_sequence(dims, "rebind dims")
    strides = require_sequence(strides, "rebind strides")
    rank = len(dims)
    if not 1 <= rank <= 5:
        raise IntrinError("rank", f"descriptor rank must be 1..5, got {rank} dims")
    if len(strides) != rank - 1:
        raise IntrinError("ord", f"a rank-{rank} rebind takes {rank - 1} strides (dims "
                          f"1..{rank - 1}), got {len(strides)}")
    desc = _descriptor(desc, "rebind")
    operands = [desc, _address(address, "rebind"),
                *[_extent(d, f"rebind dim {i}") for i, d in enumerate(dims)],
                *[_stride(s, f"rebind stride {i + 1}") for i, s in enumerate(strides)]]
    spec = {"rank": rank, "space": _space_of(desc, space), "scope": scope}
    return REBIND.call(spec, operands, arch)
