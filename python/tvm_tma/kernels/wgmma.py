"""The consumer side of the GEMM: WGMMA on shared-memory descriptors of the ring's slots.

A consumer warpgroup keeps its accumulator tile in registers and, per K step, waits for a
ring slot, issues ``block_k / 16`` ``wgmma.mma_async m64nNk16`` per 64-row sub-tile on
descriptors of the slot, commits them as a group and waits until at most this group is in
flight: the previous step's group is then done reading its slot, which it releases. So one
group of MMAs runs while the next slot's wait completes, and the producer stays up to
``stages`` slots ahead. :func:`make_mma_unit` builds that mainloop for one configuration,
:func:`make_release` the slot release it ends each step with.

The descriptors follow the slot layout the TMA wrote (:func:`swizzled_layout`, the 128B
swizzle): K-major tiles (A; B as N x K) have 128-byte rows in 8-row, 1024-byte swizzle
atoms (stride byte offset 1024); the N-major B tile (B as K x N) is 64-column atoms stacked
along N, ``block_k`` rows of 128 bytes apart (leading byte offset), read with the transpose
bit. Each k16 step moves the descriptor's start address by 32 bytes (K-major) or 16 rows of
128 bytes (N-major). :func:`descriptor_fields` computes those numbers once, so a kernel
whose slots hold the same tiles (conv2d's im2col A tile is an ordinary K-major tile once in
shared memory) uses the same mainloop.

Ring uses are counted, not tracked: the mainloop numbers them ``it = j * steps + k`` (the
CTA's work unit ordinal ``j``, K step ``k``) exactly as the producer does, so slot and
parity agree on both sides (:mod:`tvm_tma.pipeline`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout
from tvm.script import tirx as T

from .gemm_config import GemmConfig

#: K extent of one wgmma instruction for 16-bit inputs.
MMA_K = 16
#: The swizzle mode of the slots, as ``mma_shared_layout`` and the wgmma matrix descriptor
#: both number it (3: 128-byte swizzle).
SWIZZLE_128B = 3


def swizzled_layout(dtype: str, shape: tuple[int, ...]):
    """The 128B-swizzled shared layout of ``shape`` (outer dims stacked slots) that the TMA
    writes and the wgmma descriptors of :func:`descriptor_fields` address."""
    return mma_shared_layout(dtype, SWIZZLE_128B, shape)


@dataclass(frozen=True)
class DescriptorFields:
    """wgmma matrix-descriptor fields and advances, in 16-byte units."""

    #: Leading and stride byte offsets of the A descriptor (K-major).
    a_lead: int
    a_stride: int
    #: Leading and stride byte offsets of the B descriptor (K-major or N-major).
    b_lead: int
    b_stride: int
    #: Start-address advance per k16 step of A and of B.
    a_step: int
    b_step: int
    #: Start-address advance per 64-row A sub-tile.
    a_sub: int


def descriptor_fields(cfg: GemmConfig) -> DescriptorFields:
    """The descriptor fields of ``cfg``'s slots: K-major tiles have 1024-byte 8-row atoms;
    the N-major B tile has 64-column atoms ``block_k`` rows of 128 bytes apart."""
    kn = cfg.b_layout == "kn"
    a_step = MMA_K * cfg.element_bytes // 16  # 32 bytes along a 128-byte row
    return DescriptorFields(
        a_lead=1, a_stride=1024 // 16,
        b_lead=cfg.block_k * 128 // 16 if kn else 1, b_stride=1024 // 16,
        a_step=a_step,
        b_step=MMA_K * 128 // 16 if kn else a_step,  # N-major: 16 rows of 128 bytes
        a_sub=64 * cfg.block_k * cfg.element_bytes // 16)


def make_release(cfg: GemmConfig) -> Callable[..., None]:
    """``release(ring, it, lane)``: one warpgroup hands ring use ``it`` back.

    One arrival per warpgroup (the "empty" barrier counts warpgroups, not threads): from
    lane 0, or in a cluster from lanes 0 .. cluster-1, lane r on CTA r's barrier (the
    arrivals travel in parallel), since a multicast slot is empty only once every CTA's
    consumers have read it.
    """
    cluster = cfg.cluster

    # fmt: off
    @T.inline
    def release(ring, it, lane):
        if cluster > 1:
            if lane < cluster:
                ring.consumer_release(it, rank=lane)
        elif lane == 0:
            ring.consumer_release(it)
    # fmt: on
    return release


def make_mma_steps(cfg: GemmConfig) -> Callable[..., None]:
    """``mma_steps(ring, a_ring, b_ring, acc, desc_a, desc_b, it0, count, row0, lane)``: one
    consumer warpgroup's mainloop over ``count`` consecutive ring uses ``it0 ..
    it0 + count - 1`` (``count`` at least 1, a constant or an expression).

    It computes rows ``row0 .. row0 + consumer_rows - 1`` of each slot's A tile times its B
    tile into ``acc`` (``cfg.accumulators`` fp32 registers per thread, in the wgmma fragment
    order the epilogue reads), overwriting ``acc`` at the first k16 step: the sum of the
    ``count`` K steps' products. ``desc_a`` / ``desc_b`` are one-element uint64 local
    buffers for the descriptors. A work unit is ``steps_per_unit`` uses
    (:func:`make_mma_unit`); a stream-K segment is whatever part of a tile's K steps the
    CTA's run holds.
    """
    bn, bk = cfg.block_n, cfg.block_k
    m_sub = cfg.consumer_rows // 64
    kn = cfg.b_layout == "kn"
    ptx_type = "bf16" if cfg.dtype == "bfloat16" else "f16"
    mma = T.ptx[f"wgmma.mma_async.sync.aligned.m64n{bn}k{MMA_K}.f32.{ptx_type}.{ptx_type}"]
    fields = descriptor_fields(cfg)
    a_lead, a_stride, a_step, a_sub = fields.a_lead, fields.a_stride, fields.a_step, fields.a_sub
    b_lead, b_stride, b_step = fields.b_lead, fields.b_stride, fields.b_step
    release = make_release(cfg)

    # fmt: off
    @T.inline
    def mma_steps(ring, a_ring, b_ring, acc, desc_a, desc_b, it0, count, row0, lane):
        # Wait for each slot, run its MMAs, and release the previous slot once the group
        # that read it has retired.
        for ks in T.serial(count):
            it = T.meta_var(it0 + ks)
            s = T.meta_var(ring.slot(it))
            ring.consumer_wait(it)
            T.cuda.wgmma.encode_matrix_descriptor(
                T.address_of(desc_a[0]), a_ring.ptr_to([s, row0, 0]), a_lead, a_stride,
                SWIZZLE_128B)
            T.cuda.wgmma.encode_matrix_descriptor(
                T.address_of(desc_b[0]), b_ring.ptr_to([s, 0, 0]), b_lead, b_stride,
                SWIZZLE_128B)
            T.ptx.wgmma.fence.sync.aligned()
            for kk in T.unroll(bk // MMA_K):
                for mi in T.unroll(m_sub):
                    mma(*[acc[mi * (bn // 2) + i] for i in range(bn // 2)],
                        desc_a[0] + T.uint64(mi * a_sub + kk * a_step),
                        desc_b[0] + T.uint64(kk * b_step),
                        T.Or(ks > 0, kk > 0), 1, 1, 0, 1 if kn else 0)
            T.ptx.wgmma.commit_group.sync.aligned()
            # At most this step's group in flight: the previous one has read its slot.
            T.ptx.wgmma.wait_group.sync.aligned(1)
            if ks > 0:
                release(ring, it - 1, lane)
        T.ptx.wgmma.wait_group.sync.aligned(0)
        release(ring, it0 + count - 1, lane)
    # fmt: on
    return mma_steps


def make_mma_unit(cfg: GemmConfig) -> Callable[..., None]:
    """``mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, row0, lane)``: the mainloop
    (:func:`make_mma_steps`) over work unit ordinal ``j``: ring uses ``j * steps ..
    j * steps + steps - 1`` with ``steps = cfg.steps_per_unit``, the numbering the
    producer uses too."""
    steps = cfg.steps_per_unit
    mma_steps = make_mma_steps(cfg)

    @T.inline
    def mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, row0, lane):
        mma_steps(ring, a_ring, b_ring, acc, desc_a, desc_b, j * steps, steps, row0, lane)

    return mma_unit
