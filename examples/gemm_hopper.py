"""A TMA-fed, warp-specialized WGMMA GEMM for Hopper, written in TVMScript.

``C = A @ B^T`` (B given as N x K, cuBLAS's "TN") or ``C = A @ B`` (B given as K x N), with
A row-major M x K, bf16 or fp16 inputs, fp32 accumulation and C in the input type.

Run it: ``python examples/gemm_hopper.py`` builds the kernels, assembles them for sm_90a
and, on a Hopper GPU, checks a ragged problem against numpy.

How the kernel works
--------------------
The grid is persistent: ``ctas`` CTAs (one per SM) walk the ``ceil(M / BM) x ceil(N / BN)``
output tiles; CTA ``b`` takes tiles ``b, b + ctas, b + 2 ctas, ...``. Tile numbers map to
(row block, column block) in groups of ``group_m`` row blocks (:func:`tile_coordinates`),
so the CTAs running at one moment share A row blocks and B column blocks in L2.

Each CTA has three warpgroups (384 threads):

* **Producer** (warpgroup 0): gives registers back (``setmaxnreg.dec`` to 40) and one
  thread issues, for every K step of every tile, the TMA loads of an A tile (BM x BK) and a
  B tile (BN x BK, or BK x BN) into the next slot of a ring of ``stages`` 128B-swizzled
  slots (:class:`tvm_tma.pipeline.TmaPipeline`: it waits for the slot's "empty" barrier,
  announces the slot's bytes on its "full" barrier, then copies with
  ``Tx.copy_async(..., dispatch="tma", mbar=..., oob="zero")``). Edge tiles read past M, N
  or K; TMA fills those elements with zeros, which add nothing to the products.
* **Consumers** (warpgroups 1 and 2, cooperative): take ``setmaxnreg.inc`` to 232
  registers. Warpgroup ``c`` owns rows ``64c .. 64c + 63`` of the tile and keeps its
  64 x BN fp32 accumulator in registers. Per K step it waits for the slot's "full"
  barrier, issues ``BK / 16`` ``wgmma.mma_async m64nBNk16`` on shared-memory descriptors
  of the slot, commits them as a group and waits until at most this group is in flight:
  the previous step's group is then done reading its slot, which it releases ("empty").
  So one group of MMAs runs while the next slot's wait completes, and the producer stays
  up to ``stages`` slots ahead.
* **Epilogue** (consumers): after the tile's last MMA the accumulators are rounded to the
  output type and written into a 128B-swizzled C stage in shared memory (``epilogue_n``
  columns at a time), then one thread stores it with a TMA store (``oob="skip"``: the parts
  of an edge tile past M or N are not written). Each stage waits until the previous store
  has read the C stage.

The barrier phases are counted, not tracked: producer and consumers both number their uses
of the ring ``it = j * k_steps + k`` (tile ordinal j of this CTA, K step k), so slot and
parity are ``it % stages`` and ``it // stages % 2`` on both sides (see
:mod:`tvm_tma.pipeline` for the protocol drawn out step by step).

The WGMMA operand descriptors follow the slot layout the TMA wrote
(``mma_shared_layout(dtype, 3, ...)``): K-major tiles (A; B as N x K) have 128-byte rows
in 8-row, 1024-byte swizzle atoms (stride byte offset 1024); the N-major B tile (B as
K x N) is 64-column atoms stacked along N, 8 KiB apart (leading byte offset), read with
the transpose bit. Each k16 step moves the descriptor's start address by 32 bytes
(K-major) or 16 rows of 128 bytes (N-major).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import tvm
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from tvm_tma.demo import hopper_available  # importing tvm_tma registers dispatch="tma"
from tvm_tma.pipeline import TmaPipeline

#: Bytes at the front of dynamic shared memory for the ring's mbarriers; the tiles start
#: right after, on the 1024-byte period of the 128B swizzle.
BARRIER_BYTES = 1024
#: Warpgroup size, and the register budgets of the producer and the consumers
#: (2 x 128 x 232 + 128 x 40 = 64512 of the SM's 65536 registers).
WARPGROUP = 128
PRODUCER_REGISTERS = 40
CONSUMER_REGISTERS = 232
#: K extent of one wgmma instruction for 16-bit inputs.
MMA_K = 16
#: Largest dynamic shared memory a Hopper CTA may use.
MAX_SHARED = 227 * 1024


@dataclass(frozen=True)
class GemmConfig:
    """One GEMM problem and how the kernel cuts it up."""

    m: int
    n: int
    k: int
    dtype: str = "bfloat16"
    #: "nk": B is given as N x K (C = A @ B^T, cuBLAS "TN"); "kn": B is K x N (C = A @ B).
    b_layout: str = "nk"
    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    stages: int = 4
    #: Row blocks per group of the tile order (L2 reuse); 1 is plain row-major order.
    group_m: int = 8
    #: Columns of C staged in shared memory per TMA store (0: the whole block_n). A
    #: narrower C stage leaves room for one more ring slot.
    epilogue_n: int = 128
    ctas: int = 132

    @classmethod
    def for_problem(cls, m: int, n: int, k: int, **options) -> GemmConfig:
        """The default tiling for a problem: 128 x 256 tiles (4 stages, C staged 128
        columns at a time), or 128 x 128 tiles when 128 x 256 ones would leave SMs idle.

        From the sweep in benchmarks/RESULTS.md: on the H200, 128 x 256 x 64 with 4 stages
        is fastest wherever there are at least as many tiles as SMs; a 1000 x 2000 problem
        has only 64 such tiles for 132 SMs, and 128 x 128 tiles (128 of them) run it 1.2x
        faster.
        """
        wide = cls(m, n, k, **options)
        if wide.num_tiles >= wide.ctas:
            return wide
        return cls(m, n, k, **{"block_n": 128, "stages": 4, "epilogue_n": 0, **options})

    @property
    def consumers(self) -> int:
        """Consumer warpgroups: 64 rows of the tile each."""
        return self.block_m // 64

    @property
    def threads(self) -> int:
        return WARPGROUP * (1 + self.consumers)

    @property
    def element_bytes(self) -> int:
        return tvm.DataType(self.dtype).bits // 8

    @property
    def a_tile_bytes(self) -> int:
        return self.block_m * self.block_k * self.element_bytes

    @property
    def b_tile_bytes(self) -> int:
        return self.block_n * self.block_k * self.element_bytes

    @property
    def epilogue_cols(self) -> int:
        return self.epilogue_n or self.block_n

    @property
    def c_tile_bytes(self) -> int:
        return self.block_m * self.epilogue_cols * self.element_bytes

    @property
    def shared_bytes(self) -> int:
        return (BARRIER_BYTES + self.stages * (self.a_tile_bytes + self.b_tile_bytes)
                + self.c_tile_bytes)

    @property
    def m_blocks(self) -> int:
        return math.ceil(self.m / self.block_m)

    @property
    def n_blocks(self) -> int:
        return math.ceil(self.n / self.block_n)

    @property
    def k_steps(self) -> int:
        return math.ceil(self.k / self.block_k)

    @property
    def num_tiles(self) -> int:
        return self.m_blocks * self.n_blocks

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def check(self) -> None:
        """Refuse configurations the kernel does not handle, naming the offending value."""
        if self.dtype not in ("bfloat16", "float16"):
            raise ValueError(f"dtype={self.dtype!r}: 'bfloat16' or 'float16'")
        if self.b_layout not in ("nk", "kn"):
            raise ValueError(f"b_layout={self.b_layout!r}: 'nk' (N x K) or 'kn' (K x N)")
        for name, extent in (("m", self.m), ("n", self.n), ("k", self.k)):
            if extent < 8 or extent % 8:
                raise ValueError(f"{name}={extent}: GEMM extents must be positive multiples "
                                 f"of 8 (16-byte rows for TMA)")
        if self.block_m not in (64, 128):
            raise ValueError(f"block_m={self.block_m}: 64 or 128 (one or two consumer "
                             f"warpgroups of 64 rows)")
        if self.block_n % 64 or not 64 <= self.block_n <= 256:
            raise ValueError(f"block_n={self.block_n}: a multiple of 64 up to 256 "
                             f"(wgmma N, whole 128-byte swizzle atoms)")
        if self.block_k != 64:
            raise ValueError(f"block_k={self.block_k}: 64 (one 128-byte swizzle row)")
        if self.stages < 2:
            raise ValueError(f"stages={self.stages}: the ring needs at least 2 slots")
        if self.epilogue_cols % 64 or self.block_n % self.epilogue_cols:
            raise ValueError(f"epilogue_n={self.epilogue_n}: whole 64-column atoms that "
                             f"divide block_n={self.block_n}")
        if self.group_m < 1 or self.ctas < 1:
            raise ValueError(f"group_m={self.group_m}, ctas={self.ctas}: both at least 1")
        if self.shared_bytes > MAX_SHARED:
            raise ValueError(f"{self.stages} stages of {self.block_m}x{self.block_n}x"
                             f"{self.block_k} tiles need {self.shared_bytes} bytes of shared "
                             f"memory (> {MAX_SHARED})")


def tile_coordinates(tile, m_blocks: int, n_blocks: int, group_m: int):
    """(row block, column block) of output tile ``tile`` in grouped order.

    Tiles go column by column within a group of ``group_m`` row blocks, group after group,
    so consecutive tiles (run by neighbouring CTAs at the same moment) reuse the group's A
    row blocks and each B column block ``group_m`` times while they are in L2.
    """
    per_group = group_m * n_blocks
    first = tile // per_group * group_m
    rows = T.min(m_blocks - first, group_m)
    within = tile % per_group
    return first + within % rows, within // rows


def gemm_kernel(cfg: GemmConfig):
    """The persistent warp-specialized GEMM of ``cfg`` as a TVMScript PrimFunc."""
    cfg.check()
    m, n, k, dtype = cfg.m, cfg.n, cfg.k, cfg.dtype
    bm, bn, bk, stages = cfg.block_m, cfg.block_n, cfg.block_k, cfg.stages
    ctas, k_steps, num_tiles = cfg.ctas, cfg.k_steps, cfg.num_tiles
    m_blocks, n_blocks, group_m = cfg.m_blocks, cfg.n_blocks, cfg.group_m
    rounds = math.ceil(num_tiles / ctas)
    elem = cfg.element_bytes
    kn = cfg.b_layout == "kn"
    b_shape = (k, n) if kn else (n, k)
    b_slot = (bk, bn) if kn else (bn, bk)
    acc_regs = bn // 2  # fp32 accumulators per consumer thread (64 x bn over 128 threads)
    ptx_type = "bf16" if dtype == "bfloat16" else "f16"
    mma = T.ptx[f"wgmma.mma_async.sync.aligned.m64n{bn}k{MMA_K}.f32.{ptx_type}.{ptx_type}"]
    # Descriptor fields in 16-byte units: K-major tiles have 1024-byte 8-row atoms; the
    # N-major B tile has 64-column atoms bk rows of 128 bytes apart.
    a_lead, a_stride = 1, 1024 // 16
    b_lead, b_stride = ((bk * 128 // 16, 1024 // 16) if kn else (1, 1024 // 16))
    a_step = MMA_K * elem // 16  # descriptor advance per k16: 32 bytes along a 128-byte row
    b_step = MMA_K * 128 // 16 if kn else a_step  # N-major: 16 rows of 128 bytes
    a_offset = BARRIER_BYTES // elem
    b_offset = (BARRIER_BYTES + stages * cfg.a_tile_bytes) // elem
    c_offset = (BARRIER_BYTES + stages * (cfg.a_tile_bytes + cfg.b_tile_bytes)) // elem
    tile_bytes = cfg.a_tile_bytes + cfg.b_tile_bytes
    en = cfg.epilogue_cols

    # fmt: off
    @T.prim_func
    def gemm(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
        A = T.match_buffer(A_ptr, (m, k), dtype, layout=TileLayout(S[m, k]))
        B = T.match_buffer(B_ptr, b_shape, dtype, layout=TileLayout(S[b_shape]))
        C = T.match_buffer(C_ptr, (m, n), dtype, layout=TileLayout(S[m, n]))
        T.device_entry()
        cta = T.cta_id([ctas])
        tid = T.thread_id([cfg.threads])
        dyn = T.alloc_buffer((cfg.shared_bytes,), "uint8", scope="shared.dyn")
        full = T.decl_buffer((stages,), "uint64", dyn.data, elem_offset=0)
        empty = T.decl_buffer((stages,), "uint64", dyn.data, elem_offset=stages)
        a_ring = T.decl_buffer((stages, bm, bk), dtype, dyn.data, elem_offset=a_offset,
                               layout=mma_shared_layout(dtype, 3, (stages, bm, bk)))
        b_ring = T.decl_buffer((stages, *b_slot), dtype, dyn.data, elem_offset=b_offset,
                               layout=mma_shared_layout(dtype, 3, (stages, *b_slot)))
        c_tile = T.decl_buffer((bm, en), dtype, dyn.data, elem_offset=c_offset,
                               layout=mma_shared_layout(dtype, 3, (bm, en)))
        acc = T.alloc_local((acc_regs,), "float32")
        desc_a = T.alloc_local((1,), "uint64")
        desc_b = T.alloc_local((1,), "uint64")
        ring = TmaPipeline(full, empty, stages, consumers=cfg.consumers)
        warpgroup = T.meta_var(tid // WARPGROUP)

        if tid == 0:
            ring.init()
        T.cuda.cta_sync()

        if warpgroup == 0:
            T.ptx.setmaxnreg.dec.sync.aligned.u32(PRODUCER_REGISTERS)
            if tid == 0:
                for j in T.serial(rounds):
                    tile = T.meta_var(cta + j * ctas)
                    if tile < num_tiles:
                        mb, nb = T.meta_var(tile_coordinates(tile, m_blocks, n_blocks,
                                                             group_m))
                        for ks in T.serial(k_steps):
                            it = T.meta_var(j * k_steps + ks)
                            s = T.meta_var(it % stages)
                            ring.producer_acquire(it)
                            ring.producer_commit(it, tile_bytes)
                            Tx.copy_async(a_ring[s, :, :],
                                          A[mb * bm:mb * bm + bm, ks * bk:ks * bk + bk],
                                          dispatch="tma", mbar=ring.full_barrier(it),
                                          oob="zero")
                            if kn:
                                Tx.copy_async(b_ring[s, :, :],
                                              B[ks * bk:ks * bk + bk, nb * bn:nb * bn + bn],
                                              dispatch="tma", mbar=ring.full_barrier(it),
                                              oob="zero")
                            else:
                                Tx.copy_async(b_ring[s, :, :],
                                              B[nb * bn:nb * bn + bn, ks * bk:ks * bk + bk],
                                              dispatch="tma", mbar=ring.full_barrier(it),
                                              oob="zero")
        else:
            T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGISTERS)
            consumer = T.meta_var(warpgroup - 1)
            lane = T.meta_var(tid % WARPGROUP)
            for j in T.serial(rounds):
                tile = T.meta_var(cta + j * ctas)
                if tile < num_tiles:
                    mb, nb = T.meta_var(tile_coordinates(tile, m_blocks, n_blocks, group_m))
                    for ks in T.serial(k_steps):
                        it = T.meta_var(j * k_steps + ks)
                        s = T.meta_var(it % stages)
                        ring.consumer_wait(it)
                        T.cuda.wgmma.encode_matrix_descriptor(
                            T.address_of(desc_a[0]), a_ring.ptr_to([s, consumer * 64, 0]),
                            a_lead, a_stride, 3)
                        T.cuda.wgmma.encode_matrix_descriptor(
                            T.address_of(desc_b[0]), b_ring.ptr_to([s, 0, 0]),
                            b_lead, b_stride, 3)
                        T.ptx.wgmma.fence.sync.aligned()
                        for kk in T.unroll(bk // MMA_K):
                            mma(*[acc[i] for i in range(acc_regs)],
                                desc_a[0] + T.uint64(kk * a_step),
                                desc_b[0] + T.uint64(kk * b_step),
                                T.Or(ks > 0, kk > 0), 1, 1, 0, 1 if kn else 0)
                        T.ptx.wgmma.commit_group.sync.aligned()
                        # At most this step's group in flight: the previous one has read
                        # its slot, so release that slot to the producer.
                        T.ptx.wgmma.wait_group.sync.aligned(1)
                        if ks > 0 and lane == 0:
                            ring.consumer_release(it - 1)
                    T.ptx.wgmma.wait_group.sync.aligned(0)
                    if lane == 0:
                        ring.consumer_release(j * k_steps + k_steps - 1)
                    # Epilogue, en columns at a time: the previous TMA store must have
                    # read the C stage before it is overwritten.
                    warp = T.meta_var(lane // 32)
                    for h in T.unroll(bn // en):
                        if tid == WARPGROUP:
                            T.ptx.cp.async_.bulk.wait_group.read(0)
                        T.ptx.bar.sync(1, WARPGROUP * cfg.consumers)
                        for i in T.unroll(en // 2):
                            # wgmma m64nN f32 fragment: register r of lane l of warp w
                            # holds row 16w + l/4 + 8*((r/2)%2), column 8*(r/4) + 2*(l%4)
                            # + r%2; this stage holds registers h*en/2 .. (h+1)*en/2 - 1.
                            c_tile[consumer * 64 + warp * 16 + lane % 32 // 4 + i // 2 % 2 * 8,
                                   i // 4 * 8 + lane % 4 * 2 + i % 2] = T.Cast(
                                       dtype, acc[h * (en // 2) + i])
                        T.ptx.fence.proxy.async_.shared__cta()
                        T.ptx.bar.sync(1, WARPGROUP * cfg.consumers)
                        n0 = T.meta_var(nb * bn + h * en)
                        if tid == WARPGROUP and n0 < n:
                            Tx.copy_async(C[mb * bm:mb * bm + bm, n0:n0 + en],
                                          c_tile[:, :], dispatch="tma", oob="skip")
                            T.ptx.cp.async_.bulk.commit_group()
            if tid == WARPGROUP:
                T.ptx.cp.async_.bulk.wait_group.read(0)
    # fmt: on
    return gemm


#: Relative rounding of one output element (C is rounded from fp32 to the input type).
OUTPUT_EPS = {"bfloat16": 2.0**-8, "float16": 2.0**-11}


def reference(a: np.ndarray, b: np.ndarray, b_layout: str) -> tuple[np.ndarray, np.ndarray]:
    """fp32 ``A @ B`` (``B`` as given: N x K for "nk", K x N for "kn"), and ``|A| @ |B|``."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    b_kn = b32.T if b_layout == "nk" else b32
    return a32 @ b_kn, np.abs(a32) @ np.abs(b_kn)


def error_bound(ref, magnitude, k: int, dtype: str):
    """How far each element of C may be from the fp32 reference ``ref``.

    C is the fp32 sum of K products, rounded once to bf16/fp16: its own rounding is at most
    ``eps_out * |C|`` (2^-8 for bf16, 2^-11 for fp16), and two fp32 summation orders of the
    same K products differ by at most about ``K * 2^-24 * sum |products|`` (``magnitude`` is
    ``|A| @ |B|``). The bound takes twice each, plus 1e-6 for exact zeros. Works on numpy
    arrays and torch tensors alike.
    """
    return 2 * OUTPUT_EPS[dtype] * abs(ref) + 2 * k * 2.0**-24 * magnitude + 1e-6


def run(cfg: GemmConfig, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Build and launch ``cfg`` on random data; returns (C, fp32 reference, bound)."""
    import ml_dtypes

    from tvm_tma.testing.runner import compile_kernel

    np_type = ml_dtypes.bfloat16 if cfg.dtype == "bfloat16" else np.float16
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((cfg.m, cfg.k)).astype(np_type)
    b_shape = (cfg.n, cfg.k) if cfg.b_layout == "nk" else (cfg.k, cfg.n)
    b = rng.standard_normal(b_shape).astype(np_type)
    device = tvm.cuda(0)
    c = tvm.runtime.tensor(np.full((cfg.m, cfg.n), np.nan, dtype=np_type), device)
    kernel = compile_kernel(gemm_kernel(cfg)).executable["main"]
    kernel(tvm.runtime.tensor(a, device), tvm.runtime.tensor(b, device), c)
    device.sync()
    ref, magnitude = reference(a, b, cfg.b_layout)
    return c.numpy().astype(np.float32), ref, error_bound(ref, magnitude, cfg.k, cfg.dtype)


def main() -> int:
    from tvm_tma.testing.runner import assemble, compile_kernel

    cfg = GemmConfig.for_problem(1000, 2000, 3000)  # ragged: no extent a multiple of a tile
    cubin = assemble(compile_kernel(gemm_kernel(cfg)).cuda_source)
    print(f"{cfg}: {len(cubin)} bytes of sm_90a cubin")
    if not hopper_available():
        print("no Hopper GPU here: compiled and assembled only")
        return 0
    c, ref, bound = run(cfg)
    worst = float(np.max(np.abs(c - ref) / bound))
    ok = bool(np.isfinite(c).all()) and worst <= 1.0
    print(f"C = A @ B^T, {cfg.m}x{cfg.n}x{cfg.k} {cfg.dtype}: "
          f"{'every element within' if ok else 'OUTSIDE'} the bound (worst error/bound "
          f"{worst:.3f})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
