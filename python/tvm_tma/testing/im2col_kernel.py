"""A kernel that materializes a convolution's whole im2col matrix through TMA im2col loads.

It is the hardware's side of the model's ground truth: one CTA walks every (row block,
column block) tile of the GEMM view ``A`` of an NHWC activation, loads it with
``Tx.copy_async(tile, A[m0:m0 + bm, k0:k0 + bk], dispatch="tma")`` (an im2col load, with
``oob="zero"`` when the last row block runs past the last output pixel), waits, and stores
the tile to ``D`` with a tiled TMA store. ``D`` (the row blocks padded to whole tiles, by
``R*S*C`` columns) then holds ``A`` exactly, and zeros past its last row, which
:func:`expected_matrix` computes from the convolution's definition, apart from the TMA model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from ..conv import Conv2dGeometry
from .im2col_model import conv_gemm_view, pad_taps


@dataclass(frozen=True)
class Im2colCase:
    """One convolution and the tile the kernel moves it in."""

    geometry: Conv2dGeometry
    block_m: int
    block_k: int
    dtype: str = "float16"
    swizzle: int = 0  # 0, or 1/2/3 for TVM's 32/64/128B MMA shared layouts
    cache_hint: str | None = None  # an L2 eviction priority for the loads (cache_hint=)
    #: 0: the 2-D view, K blocks inside a tap. Else each tap's channels padded to this
    #: many columns (a multiple of block_k): the 3-D view (pixels, taps, channels), loads
    #: past a tap's channels reading zeros (``oob="zero"``).
    tap_columns: int = 0

    @property
    def row_blocks(self) -> int:
        return -(-self.geometry.gemm_m // self.block_m)

    @property
    def taps(self) -> int:
        return self.geometry.taps_view_shape[1]

    @property
    def columns(self) -> int:
        """Columns of the materialized matrix: K, or the taps times ``tap_columns``."""
        return self.taps * self.tap_columns if self.tap_columns else self.geometry.gemm_k

    @property
    def col_blocks(self) -> int:
        return self.columns // self.block_k

    @property
    def padded_rows(self) -> int:
        return self.row_blocks * self.block_m

    @property
    def ragged(self) -> bool:
        return self.geometry.gemm_m % self.block_m != 0

    def tile_layout(self):
        if not self.swizzle:
            return TileLayout(S[self.block_m, self.block_k])
        from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout

        return mma_shared_layout(self.dtype, self.swizzle, (self.block_m, self.block_k))


def im2col_kernel(case: Im2colCase):
    """The materializing kernel of ``case`` (arguments: X (N, H, W, C) and D)."""
    g, bm, bk, dtype = case.geometry, case.block_m, case.block_k, case.dtype
    element = 2 if "16" in dtype else (1 if "8" in dtype else 4)
    nbytes = bm * bk * element
    rows, cols, padded_rows = case.row_blocks, case.col_blocks, case.padded_rows
    layout = case.tile_layout()
    padded = case.tap_columns > g.tap_channels
    options = {"oob": "zero"} if case.ragged or padded else {}
    tap_columns = case.tap_columns or 1
    a_shape = g.taps_view_shape if case.tap_columns else g.view_shape
    if case.cache_hint is not None:
        options["cache_hint"] = case.cache_hint

    # fmt: off
    @T.prim_func
    def materialize(X_ptr: T.handle, D_ptr: T.handle):
        X = T.match_buffer(X_ptr, g.argument_shape, dtype, layout=g.argument_layout)
        D = T.match_buffer(D_ptr, (padded_rows, case.columns), dtype,
                           layout=TileLayout(S[padded_rows, case.columns]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((nbytes + 1024,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((bm, bk), dtype, dyn.data, layout=layout)
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=nbytes // 8)
        A = T.decl_buffer(a_shape, dtype, X.data, elem_offset=g.view_elem_offset,
                          layout=g.view_layout)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
            for mb in T.serial(rows):
                for kb in T.serial(cols):
                    if case.tap_columns > 0:
                        tap = T.meta_var(kb * bk // tap_columns)
                        c0 = T.meta_var(kb * bk % tap_columns)
                        Tx.copy_async(tile[:, :], A[mb * bm:mb * bm + bm, tap, c0:c0 + bk],
                                      dispatch="tma", mbar=mbar.ptr_to([0]), **options)
                    else:
                        Tx.copy_async(tile[:, :],
                                      A[mb * bm:mb * bm + bm, kb * bk:kb * bk + bk],
                                      dispatch="tma", mbar=mbar.ptr_to([0]), **options)
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]),
                                                               T.uint32(nbytes))
                    T.cuda.mbarrier_wait(mbar.ptr_to([0]), (mb * cols + kb) % 2)
                    Tx.copy_async(D[mb * bm:mb * bm + bm, kb * bk:kb * bk + bk], tile[:, :],
                                  dispatch="tma")
                    T.ptx.cp.async_.bulk.commit_group()
                    T.ptx.cp.async_.bulk.wait_group.read(0)
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return materialize


def expected_matrix(case: Im2colCase, x: np.ndarray) -> np.ndarray:
    """What ``D`` holds after the kernel: the im2col matrix, zero rows past the last."""
    g = case.geometry
    matrix = conv_gemm_view(x, (g.r, g.s), g.stride, g.padding, g.dilation)
    if case.tap_columns:
        matrix = pad_taps(matrix, g.tap_channels, case.tap_columns)
    out = np.zeros((case.padded_rows, case.columns), dtype=x.dtype)
    out[:g.gemm_m] = matrix
    return out


def run_on_gpu(case: Im2colCase, executable, seed: int = 0) -> tuple[bool, str]:
    """Run the kernel on random bits with ``D`` poisoned; compare every element."""
    import torch

    rng = np.random.default_rng(seed)
    bits = rng.integers(-(1 << 15), 1 << 15, size=case.geometry.argument_shape, dtype=np.int16)
    want = expected_matrix(case, bits)
    x = torch.from_numpy(bits).cuda()
    d = torch.full((case.padded_rows, case.columns), 0x5A5A, dtype=torch.int16,
                   device="cuda")
    view = getattr(torch, case.dtype)
    executable["main"](x.view(view), d.view(view))
    torch.cuda.synchronize()
    got = d.cpu().numpy()
    wrong = np.argwhere(got != want)
    if wrong.size:
        return False, f"{len(wrong)} of {want.size} elements differ, first at {tuple(wrong[0])}"
    return True, ""
