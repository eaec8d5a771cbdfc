"""The GEMM epilogue: fp32 accumulators -> 128B-swizzled C stage -> TMA store.

After a tile's last MMA the consumer warpgroups round their accumulators to the output type
and write them into a C stage in shared memory, ``epilogue_n`` columns at a time; one
thread then stores the stage with a TMA store. Going through shared memory turns the
wgmma fragment (each thread holds pairs of columns of scattered rows) into whole swizzled
rows the TMA moves in one instruction, and ``oob="skip"`` makes the parts of an edge tile
past M or N fall away without any per-element guard. A narrower stage costs more
store/barrier rounds but leaves room for another ring slot.

With split-K the store is a TMA reduce-add (``reduce="add"``): each K part adds its
product into C, so the kernel computes ``C += A @ B``.

Each stage waits until the previous store has read the C stage (``cp.async.bulk
wait_group.read 0`` by the storing thread, then a named barrier over the threads that
share the stage), and the stage is fenced into the async proxy before the store reads it.
:func:`make_store_unit` builds this for one configuration; a kernel whose output is a GEMM
output tile (conv2d's NPQ x K output is one) reuses it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from .gemm_config import WARPGROUP, GemmConfig
from .wgmma import swizzled_layout


def c_stage_layout(cfg: GemmConfig):
    """The shared layout of the C stage(s), ``(c_stages, block_m, epilogue_cols)``: the
    swizzled layout the TMA store reads."""
    return swizzled_layout(cfg.dtype, (cfg.c_stages, cfg.block_m, cfg.epilogue_cols))


def epilogue_threads(cfg: GemmConfig) -> int:
    """Threads that meet at an epilogue barrier: every consumer (cooperative: they share
    one C stage) or one warpgroup (ping-pong: each has its own)."""
    return WARPGROUP * (1 if cfg.schedule == "pingpong" else cfg.consumers)


def make_store_unit(cfg: GemmConfig) -> Callable[..., None]:
    """``store_unit(C, c_tile, acc, cs, row0, mb, nb, lane, barrier, storer)``: write one
    consumer warpgroup's accumulators (rows ``row0 ..`` of tile (``mb``, ``nb``)) to C
    through C stage ``cs`` of ``c_tile``.

    ``barrier`` is the named barrier of the threads sharing the stage, ``storer`` the
    condition that selects the one thread that issues the stores (and waits for them).
    """
    m, n, dtype = cfg.m, cfg.n, cfg.dtype
    bm, bn, en = cfg.block_m, cfg.block_n, cfg.epilogue_cols
    m_sub = cfg.consumer_rows // 64
    split_k = cfg.split_k
    threads = epilogue_threads(cfg)
    reduce = "add" if split_k > 1 else None

    # fmt: off
    @T.inline
    def store_unit(C, c_tile, acc, cs, row0, mb, nb, lane, barrier, storer):
        # en columns at a time: round the accumulators into the C stage, then one thread
        # stores it with TMA; the previous store must have read the stage first.
        warp = T.meta_var(lane // 32)
        for h in T.unroll(bn // en):
            if storer:
                T.ptx.cp.async_.bulk.wait_group.read(0)
            T.ptx.bar.sync(T.Cast("uint32", barrier), threads)
            for mi in T.unroll(m_sub):
                for i in T.unroll(en // 2):
                    # wgmma m64nN f32 fragment: register r of lane l of warp w holds row
                    # 16w + l/4 + 8*((r/2)%2), column 8*(r/4) + 2*(l%4) + r%2; this stage
                    # holds registers h*en/2 .. (h+1)*en/2 - 1 of each 64-row sub-tile.
                    c_tile[cs, row0 + mi * 64 + warp * 16 + lane % 32 // 4 + i // 2 % 2 * 8,
                           i // 4 * 8 + lane % 4 * 2 + i % 2] = T.Cast(
                               dtype, acc[mi * (bn // 2) + h * (en // 2) + i])
            T.ptx.fence.proxy.async_.shared__cta()
            T.ptx.bar.sync(T.Cast("uint32", barrier), threads)
            n0 = T.meta_var(nb * bn + h * en)
            if storer and mb * bm < m and n0 < n:
                if split_k > 1:
                    Tx.copy_async(C[mb * bm:mb * bm + bm, n0:n0 + en], c_tile[cs, :, :],
                                  dispatch="tma", oob="skip", reduce=reduce)
                else:
                    Tx.copy_async(C[mb * bm:mb * bm + bm, n0:n0 + en], c_tile[cs, :, :],
                                  dispatch="tma", oob="skip")
                T.ptx.cp.async_.bulk.commit_group()
    # fmt: on
    return store_unit
