"""``cp.async.bulk.tensor`` / ``cp.reduce.async.bulk.tensor`` / tensor prefetch.

Spellings follow the PTX ISA and the seed templates: the default ``.tile`` mode is not
written; modifiers appear as ``.im2col*``, then ``.multicast::cluster``, then
``.cta_group::N``, then ``.L2::cache_hint``; trailing operands are im2col offsets (``h``),
the multicast mask (``h``) and the cache policy (``l``).
"""

from __future__ import annotations

from collections.abc import Sequence

import tvm
from tvm.script import tirx as T

from .errors import IntrinError
from .operands import (
    is_python_int,
    require_cluster,
    require_int,
    require_pointer,
    require_sequence,
    require_space,
)
from .registry import Family, Rendered, define, straight

LOAD_MODES = {"tile": "", "im2col": ".im2col", "im2col_w": ".im2col::w",
              "im2col_w_128": ".im2col::w::128"}
STORE_MODES = {"tile": "", "im2col_no_offs": ".im2col_no_offs"}
PREFETCH_MODES = {"tile": "", "im2col": ".im2col"}
REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")
LOAD_DESTINATIONS = ("shared::cluster", "shared::cta")


def _coords(start: int, rank: int) -> str:
    return "{" + ", ".join(f"%{start + i}" for i in range(rank)) + "}"


def _vector(start: int, count: int) -> str:
    return "{" + ", ".join(f"%{start + i}" for i in range(count)) + "}"


def im2col_offset_count(mode: str, rank: int) -> int:
    """im2col takes rank-2 corner offsets; the ::w forms take (wHalo, wOffset)."""
    if mode == "im2col":
        return rank - 2
    if mode.startswith("im2col_w"):
        return 2
    return 0


def _check_rank(rank: int, mode: str) -> None:
    low = 3 if mode != "tile" else 1
    if not low <= rank <= 5:
        raise IntrinError("rank", f"{mode} mode takes rank {low}..5, got {rank}")


def _check_mode(mode: str, modes, what: str) -> None:
    if not isinstance(mode, str) or mode not in modes:
        raise IntrinError("mode", f"{what} has no mode {mode!r} (modes: {', '.join(modes)})")


#: operand group -> the rule a missing or extra operand of that group violates
_GROUP_RULES = {"coordinates": "coordinates", "cache policy": "cache-hint",
                "multicast mask": "multicast", "im2col offsets": "im2col-offsets"}


def _check_count(what: str, operands: Sequence, layout: list[tuple[str, int]]) -> None:
    """Operand count check; a mismatch names the group that explains it.

    In the printed form, flags (``multicast=1``, ``cache_hint=1``) and the mode promise
    trailing operands and the rank promises coordinates. Too few operands are blamed on the
    last promised optional group; too many on the first optional group whose flag is off;
    otherwise on the coordinates.
    """
    expected = sum(n for _, n in layout)
    if len(operands) == expected:
        return
    described = ", ".join(f"{n} {name}" for name, n in layout if n)
    optional = [(name, n) for name, n in layout if name in _GROUP_RULES and name != "coordinates"]
    if len(operands) < expected:
        promised = [name for name, n in optional if n]
        blamed = promised[-1] if promised else None
    else:
        unpromised = [name for name, n in optional if not n and name != "im2col offsets"]
        blamed = unpromised[0] if unpromised else None
    if blamed is None and any(name == "coordinates" for name, _ in layout):
        blamed = "coordinates"
    rule = _GROUP_RULES.get(blamed, "spec") if blamed else "spec"
    raise IntrinError(rule, f"{what} takes {expected} operands ({described}), "
                      f"got {len(operands)}")


# ---- load -----------------------------------------------------------------------------

def _load_check(spec: dict, operands: Sequence) -> None:
    rank, mode = spec["rank"], spec["mode"]
    _check_mode(mode, LOAD_MODES, "cp.async.bulk.tensor load")
    _check_rank(rank, mode)
    if spec["dst"] not in LOAD_DESTINATIONS:
        raise IntrinError("operand-space", f"load destination {spec['dst']!r} is not one of "
                          f"{LOAD_DESTINATIONS}")
    if spec["multicast"] and spec["dst"] != "shared::cluster":
        raise IntrinError("multicast", "multicast loads write shared::cluster, not shared::cta")
    if spec["multicast"]:
        require_cluster("a multicast tensor load")
    if spec["cta_group"] not in (0, 1, 2):
        raise IntrinError("cta-group", f"cta_group must be 1 or 2, got {spec['cta_group']}")
    offsets = im2col_offset_count(mode, rank)
    _check_count("load", operands, [("dst", 1), ("descriptor", 1), ("coordinates", rank),
                                    ("mbarrier", 1), ("im2col offsets", offsets),
                                    ("multicast mask", int(spec["multicast"])),
                                    ("cache policy", int(spec["cache_hint"]))])
    require_space(operands[0], ("shared",), "the load destination")
    require_space(operands[1], ("global", "param"), "the tensor map")
    require_space(operands[2 + rank], ("shared",), "the mbarrier")


def _load_render(spec: dict) -> Rendered:
    rank, mode = spec["rank"], spec["mode"]
    offsets = im2col_offset_count(mode, rank)
    modifiers = LOAD_MODES[mode] + ".mbarrier::complete_tx::bytes"
    modifiers += ".multicast::cluster" if spec["multicast"] else ""
    modifiers += f".cta_group::{spec['cta_group']}" if spec["cta_group"] else ""
    modifiers += ".L2::cache_hint" if spec["cache_hint"] else ""
    mbar = 2 + rank
    text = (f"cp.async.bulk.tensor.{rank}d.{spec['dst']}.global{modifiers} "
            f"[%0], [%1, {_coords(2, rank)}], [%{mbar}]")
    index = mbar + 1
    if offsets:
        text += f", {_vector(index, offsets)}"
        index += offsets
    for flag in ("multicast", "cache_hint"):
        if spec[flag]:
            text += f", %{index}"
            index += 1
    kinds = (["smem", "gaddr"] + ["s32"] * rank + ["smem"] + ["u16"] * offsets
             + ["u16"] * int(spec["multicast"]) + ["u64"] * int(spec["cache_hint"]))
    return straight(kinds, text + ";")


def _load_floor(spec: dict) -> tuple:
    if spec["mode"].startswith("im2col_w") or spec["cta_group"]:
        return (100, "a", 120)  # the sm_10x family only: ptxas refuses them on sm_120a
    return (90, "")


LOAD = define(Family("load", {"rank": int, "mode": str, "dst": str, "multicast": bool,
                              "cache_hint": bool, "cta_group": int},
                     _load_render, _load_check, _load_floor))


def load(dst_smem, tensor_map, coords: Sequence, mbar, *, mode: str = "tile",
         im2col_offsets: Sequence = (), multicast_mask=None, cache_hint=None,
         dst: str = "shared::cluster", cta_group: int | None = None, arch: str | None = None):
    """Tensor load global -> shared, completing ``bytes`` on ``mbar``; coords innermost first.

    ``cta_group`` defaults to ``1`` on sm_100+ targets (Blackwell writes it) and is omitted
    on Hopper.
    """
    if cta_group is None:
        from .target import current_arch, writes_cta_group

        chosen = arch if arch is not None else current_arch()
        cta_group = 1 if isinstance(chosen, str) and writes_cta_group(chosen) else 0
    elif type(cta_group).__name__ == "IntImm":
        cta_group = int(cta_group.value)
    _check_mode(mode, LOAD_MODES, "cp.async.bulk.tensor load")
    coords = require_sequence(coords, "load coordinates")
    im2col_offsets = require_sequence(im2col_offsets, "load im2col_offsets")
    if multicast_mask is not None:
        _check_mask(multicast_mask)
    spec = {"rank": len(coords), "mode": mode, "dst": dst,
            "multicast": multicast_mask is not None, "cache_hint": cache_hint is not None,
            "cta_group": cta_group}
    expected = im2col_offset_count(mode, len(coords))
    if len(im2col_offsets) != expected and mode in LOAD_MODES:
        raise IntrinError("im2col-offsets", f"{mode} load of rank {len(coords)} takes "
                          f"{expected} im2col offsets, got {len(im2col_offsets)}")
    dst_smem = _shared(dst_smem, "load dst_smem (the destination)")
    tensor_map = _tensor_map(tensor_map, "load")
    mbar = _shared(mbar, "load mbar (the mbarrier)")
    operands = [dst_smem, tensor_map, *_s32(coords, "load"), mbar,
                *_u16(im2col_offsets, "load im2col offset")]
    if multicast_mask is not None:
        operands.append(_u16([multicast_mask], "load multicast_mask", numbered=False)[0])
    if cache_hint is not None:
        operands.append(_u64(cache_hint, "load cache_hint"))
    return LOAD.call(spec, operands, arch)


# ---- store and reduce -----------------------------------------------------------------

def _store_like_check(what: str, modes):
    def check(spec: dict, operands: Sequence) -> None:
        rank, mode = spec["rank"], spec["mode"]
        _check_mode(mode, modes, what)
        _check_rank(rank, mode)
        if "op" in spec and spec["op"] not in REDUCE_OPS:
            raise IntrinError("reduce-op", f"reduction {spec['op']!r} is not one of "
                              f"{', '.join(REDUCE_OPS)}")
        _check_count(what, operands, [("descriptor", 1), ("coordinates", rank),
                                      ("source", 1), ("cache policy", int(spec["cache_hint"]))])
        require_space(operands[0], ("global", "param"), "the tensor map")
        require_space(operands[1 + rank], ("shared",), "the store source")

    return check


def _store_like_render(head: str, modes):
    def render(spec: dict) -> Rendered:
        rank = spec["rank"]
        op = f".{spec['op']}" if "op" in spec else ""
        hint = ".L2::cache_hint" if spec["cache_hint"] else ""
        text = (f"{head}.{rank}d.global.shared::cta{op}{modes[spec['mode']]}.bulk_group{hint} "
                f"[%0, {_coords(1, rank)}], [%{1 + rank}]")
        if spec["cache_hint"]:
            text += f", %{2 + rank}"
        kinds = ["gaddr"] + ["s32"] * rank + ["smem"] + ["u64"] * int(spec["cache_hint"])
        return straight(kinds, text + ";")

    return render


STORE = define(Family("store", {"rank": int, "mode": str, "cache_hint": bool},
                      _store_like_render("cp.async.bulk.tensor", STORE_MODES),
                      _store_like_check("cp.async.bulk.tensor store", STORE_MODES),
                      lambda spec: (90, "")))
REDUCE = define(Family("reduce", {"op": str, "rank": int, "mode": str, "cache_hint": bool},
                       _store_like_render("cp.reduce.async.bulk.tensor", STORE_MODES),
                       _store_like_check("cp.reduce.async.bulk.tensor", STORE_MODES),
                       lambda spec: (90, "")))


def store(tensor_map, coords: Sequence, src_smem, *, mode: str = "tile",
          cache_hint=None, arch: str | None = None):
    """Tensor store shared::cta -> global; the caller commits and waits the bulk group."""
    _check_mode(mode, STORE_MODES, "cp.async.bulk.tensor store")
    coords = require_sequence(coords, "store coordinates")
    spec = {"rank": len(coords), "mode": mode, "cache_hint": cache_hint is not None}
    operands = [_tensor_map(tensor_map, "store"), *_s32(coords, "store"),
                _shared(src_smem, "store src_smem (the source)")]
    if cache_hint is not None:
        operands.append(_u64(cache_hint, "store cache_hint"))
    return STORE.call(spec, operands, arch)


def reduce(op: str, tensor_map, coords: Sequence, src_smem, *,
           mode: str = "tile", cache_hint=None, arch: str | None = None):
    """Tensor reduction ``global[box] = op(global[box], shared)`` through a bulk group."""
    if not isinstance(op, str) or op not in REDUCE_OPS:
        raise IntrinError("reduce-op", f"reduction {op!r} is not one of {', '.join(REDUCE_OPS)}")
    _check_mode(mode, STORE_MODES, "cp.reduce.async.bulk.tensor")
    coords = require_sequence(coords, "reduce coordinates")
    spec = {"op": op, "rank": len(coords), "mode": mode, "cache_hint": cache_hint is not None}
    operands = [_tensor_map(tensor_map, "reduce"), *_s32(coords, "reduce"),
                _shared(src_smem, "reduce src_smem (the source)")]
    if cache_hint is not None:
        operands.append(_u64(cache_hint, "reduce cache_hint"))
    return REDUCE.call(spec, operands, arch)


# ---- prefetch -------------------------------------------------------------------------

def _prefetch_check(spec: dict, operands: Sequence) -> None:
    rank, mode = spec["rank"], spec["mode"]
    _check_mode(mode, PREFETCH_MODES, "cp.async.bulk.prefetch.tensor")
    _check_rank(rank, mode)
    offsets = im2col_offset_count(mode, rank)
    _check_count("prefetch", operands, [("descriptor", 1), ("coordinates", rank),
                                        ("im2col offsets", offsets),
                                        ("cache policy", int(spec["cache_hint"]))])
    require_space(operands[0], ("global", "param"), "the tensor map")


def _prefetch_render(spec: dict) -> Rendered:
    rank, mode = spec["rank"], spec["mode"]
    offsets = im2col_offset_count(mode, rank)
    hint = ".L2::cache_hint" if spec["cache_hint"] else ""
    text = (f"cp.async.bulk.prefetch.tensor.{rank}d.L2.global{PREFETCH_MODES[mode]}{hint} "
            f"[%0, {_coords(1, rank)}]")
    index = 1 + rank
    if offsets:
        text += f", {_vector(index, offsets)}"
        index += offsets
    if spec["cache_hint"]:
        text += f", %{index}"
    kinds = ["gaddr"] + ["s32"] * rank + ["u16"] * offsets + ["u64"] * int(spec["cache_hint"])
    return straight(kinds, text + ";")


PREFETCH = define(Family("prefetch", {"rank": int, "mode": str, "cache_hint": bool},
                         _prefetch_render, _prefetch_check, lambda spec: (90, "")))


def prefetch(tensor_map, coords: Sequence, *, mode: str = "tile",
             im2col_offsets: Sequence = (), cache_hint=None, arch: str | None = None):
    """L2 prefetch of the box at ``coords`` (no shared memory, no completion)."""
    _check_mode(mode, PREFETCH_MODES, "cp.async.bulk.prefetch.tensor")
    coords = require_sequence(coords, "prefetch coordinates")
    im2col_offsets = require_sequence(im2col_offsets, "prefetch im2col_offsets")
    expected = im2col_offset_count(mode, len(coords))
    if len(im2col_offsets) != expected and mode in PREFETCH_MODES:
        raise IntrinError("im2col-offsets", f"{mode} prefetch of rank {len(coords)} takes "
                          f"{expected} im2col offsets, got {len(im2col_offsets)}")
    spec = {"rank": len(coords), "mode": mode, "cache_hint": cache_hint is not None}
    operands = [_tensor_map(tensor_map, "prefetch"), *_s32(coords, "prefetch"),
                *_u16(im2col_offsets, "prefetch im2col offset")]
    if cache_hint is not None:
        operands.append(_u64(cache_hint, "prefetch cache_hint"))
    return PREFETCH.call(spec, operands, arch)


# ---- operand helpers ----------------------------------------------------------------

def _check_mask(mask) -> None:
    if is_python_int(mask) and not 0 <= mask <= 0xFFFF:
        raise IntrinError("multicast", f"multicast mask {mask:#x} does not fit 16 bits "
                          "(a cluster has at most 16 CTAs)")


def _s32(values: Sequence, family: str) -> list:
    """Tensor coordinates are ``.s32`` operands: integers of at most 32 bits."""
    out = []
    for i, v in enumerate(values):
        v = require_int(v, f"{family} coordinate {i}", 32, low=-(1 << 31), high=(1 << 31) - 1)
        out.append(v if isinstance(v, int) else T.cast(v, "int32"))
    return out


def _u16(values: Sequence, what: str, numbered: bool = True) -> list:
    """Multicast masks and im2col offsets are 16-bit ``h`` operands."""
    out = []
    for i, v in enumerate(values):
        v = require_int(v, f"{what} {i}" if numbered else what, 16, low=-(1 << 15),
                        high=0xFFFF)
        out.append(T.uint16(v & 0xFFFF) if isinstance(v, int) else T.cast(v, "uint16"))
    return out


def _u64(value, what: str):
    """An L2 cache policy (or another 64-bit ``l`` operand): a 64-bit integer."""
    value = require_int(value, what, 64, exact=True, low=0,
                        note=" (an L2 cache policy, e.g. T.uint64(...))")
    return tvm.tirx.const(value, "uint64") if isinstance(value, int) else \
        T.cast(value, "uint64")


def _tensor_map(value, family: str):
    return require_pointer(value, f"{family} tensor map", tensor_map=True)


def _shared(value, what: str):
    return require_pointer(value, what)
