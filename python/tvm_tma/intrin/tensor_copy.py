"""Typed builders for the tile-mode ``cp.async.bulk.tensor`` load and store.

Each builder checks its operands when the call is *built* (rank, coordinate count, target)
and returns a call through TVM's ``T.ptx`` dialect, which renders the inline asm with the
operand classes of the ISA: descriptor ``l``, coordinates ``r``, shared addresses ``r``.
The dispatch emits every TMA instruction through these functions.
"""

from __future__ import annotations

from collections.abc import Sequence

from tvm.script import tirx as T

from .errors import IntrinError
from .target import sm_version


def load_mnemonic(rank: int, *, arch: str = "sm_90a") -> str:
    """PTX of a tile-mode TMA load into shared::cluster completing on an mbarrier."""
    _check_rank(rank)
    cta_group = ".cta_group::1" if sm_version(arch) >= 100 else ""
    return (
        f"cp.async.bulk.tensor.{rank}d.shared::cluster.global"
        f".mbarrier::complete_tx::bytes{cta_group}"
    )


def store_mnemonic(rank: int) -> str:
    """PTX of a tile-mode TMA store from shared::cta, completing through a bulk group."""
    _check_rank(rank)
    return f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group"


def load(dst_smem, tensor_map_address, coords: Sequence, mbar, *, arch: str = "sm_90a"):
    """``cp.async.bulk.tensor`` global -> shared; ``coords`` innermost first."""
    _check_coords(coords, "load")
    return T.ptx[load_mnemonic(len(coords), arch=arch)](
        dst_smem, tensor_map_address, *_s32(coords), mbar
    )


def store(tensor_map_address, coords: Sequence, src_smem):
    """``cp.async.bulk.tensor`` shared -> global; the caller commits and waits the group."""
    _check_coords(coords, "store")
    return T.ptx[store_mnemonic(len(coords))](tensor_map_address, *_s32(coords), src_smem)


def _check_rank(rank: int) -> None:
    if not 1 <= rank <= 5:
        raise IntrinError("rank", f"tensor copies take rank 1..5, got {rank}")


def _check_coords(coords: Sequence, what: str) -> None:
    if not 1 <= len(coords) <= 5:
        raise IntrinError("rank", f"{what}: {len(coords)} coordinates (rank must be 1..5)")


def _s32(coords: Sequence) -> list:
    """Tensor coordinates are ``.s32`` operands."""
    return [c if isinstance(c, int) else T.cast(c, "int32") for c in coords]
