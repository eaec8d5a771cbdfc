"""Non-tensor bulk copies, bulk-group completion, and descriptor prefetch."""

from __future__ import annotations

from collections.abc import Sequence

from tvm.script import tirx as T

from .errors import IntrinError
from .operands import (
    describe,
    is_python_int,
    require_cluster,
    require_int,
    require_pointer,
    require_space,
)
from .registry import Family, Rendered, define, straight
from .tensor_copy import _check_count, _check_mask, _u16, _u64


def _check_size(size) -> None:
    if is_python_int(size) and (size <= 0 or size % 16):
        raise IntrinError("size", f"bulk copy size {size} bytes is not a positive multiple "
                          "of 16")


def _u32(value, what: str = "value", note: str = ""):
    """A 32-bit ``r`` operand (a byte count, a shared::cluster address)."""
    value = require_int(value, what, 32, low=0, high=0xFFFFFFFF, note=note)
    return T.uint32(value) if isinstance(value, int) else T.cast(value, "uint32")


def _size(size, family: str):
    _check_size(size)
    return _u32(size, f"{family} size", " (a byte count)")


# ---- global -> shared ---------------------------------------------------------------

def _bulk_load_check(spec: dict, operands: Sequence) -> None:
    if spec["multicast"]:
        require_cluster("a multicast bulk load")
    _check_count("bulk load", operands, [("dst", 1), ("src", 1), ("size", 1), ("mbarrier", 1),
                                         ("multicast mask", int(spec["multicast"])),
                                         ("cache policy", int(spec["cache_hint"]))])
    require_space(operands[0], ("shared",), "the bulk load destination")
    require_space(operands[1], ("global",), "the bulk load source")
    require_space(operands[3], ("shared",), "the mbarrier")


def _bulk_load_render(spec: dict) -> Rendered:
    modifiers = ".multicast::cluster" if spec["multicast"] else ""
    modifiers += ".L2::cache_hint" if spec["cache_hint"] else ""
    text = ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
            f"{modifiers} [%0], [%1], %2, [%3]")
    index = 4
    for flag in ("multicast", "cache_hint"):
        if spec[flag]:
            text += f", %{index}"
            index += 1
    kinds = (["smem", "gaddr", "u32", "smem"] + ["u16"] * int(spec["multicast"])
             + ["u64"] * int(spec["cache_hint"]))
    return straight(kinds, text + ";")


BULK_LOAD = define(Family("bulk_load", {"multicast": bool, "cache_hint": bool},
                          _bulk_load_render, _bulk_load_check, lambda spec: (90, "")))


def bulk_load(dst_smem, src_global, size, mbar, *, multicast_mask=None, cache_hint=None,
              arch: str | None = None):
    """``size`` contiguous bytes global -> shared::cluster, completing on ``mbar``."""
    if multicast_mask is not None:
        _check_mask(multicast_mask)
    operands = [require_pointer(dst_smem, "bulk_load dst_smem (the destination)"),
                _global_data(src_global, "bulk_load src_global (the source)"),
                _size(size, "bulk_load"),
                require_pointer(mbar, "bulk_load mbar (the mbarrier)")]
    if multicast_mask is not None:
        operands.append(_u16([multicast_mask], "bulk_load multicast_mask", numbered=False)[0])
    if cache_hint is not None:
        operands.append(_u64(cache_hint, "bulk_load cache_hint"))
    spec = {"multicast": multicast_mask is not None, "cache_hint": cache_hint is not None}
    return BULK_LOAD.call(spec, operands, arch)


# ---- shared -> global ---------------------------------------------------------------

def _bulk_store_check(spec: dict, operands: Sequence) -> None:
    _check_count("bulk store", operands, [("dst", 1), ("src", 1), ("size", 1),
                                          ("cache policy", int(spec["cache_hint"]))])
    require_space(operands[0], ("global",), "the bulk store destination")
    require_space(operands[1], ("shared",), "the bulk store source")


def _bulk_store_render(spec: dict) -> Rendered:
    hint = ".L2::cache_hint" if spec["cache_hint"] else ""
    text = f"cp.async.bulk.global.shared::cta.bulk_group{hint} [%0], [%1], %2"
    text += ", %3" if spec["cache_hint"] else ""
    return straight(["gaddr", "smem", "u32"] + ["u64"] * int(spec["cache_hint"]), text + ";")


BULK_STORE = define(Family("bulk_store", {"cache_hint": bool}, _bulk_store_render,
                           _bulk_store_check, lambda spec: (90, "")))


def bulk_store(dst_global, src_smem, size, *, cache_hint=None, arch: str | None = None):
    """``size`` contiguous bytes shared::cta -> global through the bulk group."""
    operands = [_global_data(dst_global, "bulk_store dst_global (the destination)"),
                require_pointer(src_smem, "bulk_store src_smem (the source)"),
                _size(size, "bulk_store")]
    if cache_hint is not None:
        operands.append(_u64(cache_hint, "bulk_store cache_hint"))
    return BULK_STORE.call({"cache_hint": cache_hint is not None}, operands, arch)


# ---- shared::cta -> shared::cluster ---------------------------------------------------

def _bulk_cluster_check(spec: dict, operands: Sequence) -> None:
    _check_count("cluster bulk copy", operands, [("dst", 1), ("src", 1), ("size", 1),
                                                 ("mbarrier", 1)])
    require_space(operands[1], ("shared",), "bulk_copy_cluster src (the cluster copy source)")


def _bulk_cluster_render(spec: dict) -> Rendered:
    # dst and mbar are shared::cluster addresses (e.g. from mapa): 32-bit values.
    text = ("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes "
            "[%0], [%1], %2, [%3];")
    return straight(["u32", "smem", "u32", "u32"], text)


BULK_COPY_CLUSTER = define(Family("bulk_copy_cluster", {"size_known": bool},
                                  _bulk_cluster_render, _bulk_cluster_check,
                                  lambda spec: (90, "")))


def bulk_copy_cluster(dst_cluster_addr, src_smem, size, mbar_cluster_addr, *,
                      arch: str | None = None):
    """shared::cta -> a (peer) CTA's shared memory; ``dst``/``mbar`` are cluster addresses."""
    # The source first: it is the one pointer operand, and a global pointer there is the
    # likeliest mix-up (the destination and mbarrier are 32-bit cluster addresses).
    src = require_pointer(src_smem, "bulk_copy_cluster src (the cluster copy source)")
    require_space(src, ("shared",), "bulk_copy_cluster src (the cluster copy source)")
    note = " (a shared::cluster address, e.g. from mapa)"
    operands = [_u32(dst_cluster_addr, "bulk_copy_cluster dst", note), src,
                _size(size, "bulk_copy_cluster"),
                _u32(mbar_cluster_addr, "bulk_copy_cluster mbar", note)]
    return BULK_COPY_CLUSTER.call({"size_known": is_python_int(size)}, operands, arch)


# ---- groups and descriptor prefetch ---------------------------------------------------

COMMIT_GROUP = define(Family("commit_group", {"bulk": bool},
                             lambda spec: straight([], "cp.async.bulk.commit_group;"),
                             lambda spec, operands: _check_count("commit_group", operands, []),
                             lambda spec: (90, "")))


def commit_group(arch: str | None = None):
    """Close the current bulk group (stores, reductions and bulk stores issued so far)."""
    return COMMIT_GROUP.call({"bulk": True}, [], arch)


def _wait_check(spec: dict, operands: Sequence) -> None:
    if spec["n"] < 0:
        raise IntrinError("wait-group", f"wait_group count must be >= 0, got {spec['n']}")
    _check_count("wait_group", operands, [])


WAIT_GROUP = define(Family(
    "wait_group", {"n": int, "read": bool},
    lambda spec: straight([], f"cp.async.bulk.wait_group{'.read' if spec['read'] else ''} "
                              f"{spec['n']};"),
    _wait_check, lambda spec: (90, "")))


def wait_group(n: int, read: bool = False, arch: str | None = None):
    """Wait until at most ``n`` bulk groups are pending (``read``: only their smem reads)."""
    if type(n).__name__ == "IntImm" and str(n.ty.dtype) != "bool":
        n = int(n.value)
    if isinstance(n, bool) or isinstance(n, float) or type(n).__name__ == "FloatImm" or (
            not is_python_int(n) and not _is_integer_expr(n)):
        raise IntrinError("operand-type", f"wait_group count must be an integer immediate "
                          f"(a Python int), got {describe(n)}")
    if not is_python_int(n):
        raise IntrinError("wait-group", f"wait_group needs an immediate count, got {n}")
    n = int(n)
    if n >= 1 << 31:
        raise IntrinError("wait-group", f"wait_group count {n} does not fit 32 bits")
    if type(read).__name__ == "IntImm":
        read = int(read.value)
    if not isinstance(read, bool) and not (is_python_int(read) and read in (0, 1)):
        raise IntrinError("operand-type", f"wait_group read must be True or False, got "
                          f"{describe(read)}")
    return WAIT_GROUP.call({"n": n, "read": bool(read)}, [], arch)


def _is_integer_expr(value) -> bool:
    ty = getattr(value, "ty", None)
    return type(ty).__name__ == "PrimType" and ty.dtype.type_code in (0, 1)


def _prefetch_descriptor_check(spec: dict, operands: Sequence) -> None:
    _check_count("prefetch_descriptor", operands, [("descriptor", 1)])
    require_space(operands[0], ("global", "param"), "the tensor map")


PREFETCH_DESCRIPTOR = define(Family(
    "prefetch_descriptor", {"space": str},
    lambda spec: straight(["gaddr"], "prefetch.tensormap [%0];"),
    _prefetch_descriptor_check, lambda spec: (90, "")))


def prefetch_descriptor(tensor_map, arch: str | None = None):
    """Bring a tensor map into the descriptor cache before its first use."""
    tensor_map = require_pointer(tensor_map, "prefetch_descriptor tensor map", tensor_map=True)
    return PREFETCH_DESCRIPTOR.call({"space": "generic"}, [tensor_map], arch)


def _global_data(value, what: str):
    return require_pointer(value, what)
