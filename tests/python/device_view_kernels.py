"""Kernels that copy a device-side view: the rows ``offs[g - 1]:offs[g]`` of a tensor.

CTA ``g`` reads its group's bounds from ``offs`` (device memory), declares the group's rows
of A and of B as views over the arguments' data, loads the first TILE rows of its A view
(zero fill past the group's end) and stores them into its B view (nothing stored past the
group's end). Both copies go through maps the CTA rebinds (``tensormap=`` slots of a
global workspace, 512 bytes per CTA: two slots for each copy).

``variant`` breaks one obligation the dispatch must prove (:data:`BROKEN`), for the
refusal tests; "ok" keeps every one.
"""

from __future__ import annotations

from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

M, K, GROUPS, TILE = 1024, 64, 4, 64
DTYPE = "float16"

#: variant -> the rule its refusal names.
BROKEN = {
    "no-slots": "tensormap-slot",  # no tensormap=
    "shared-slot": "tensormap-slot",  # slots in shared memory
    "slot-misaligned": "tensormap-slot",  # 64 bytes into a slot
    "slot-one-for-all": "tensormap-slot",  # every CTA the same slots
    "slot-overlap": "tensormap-slot",  # 128 bytes per CTA, two slots needed
    "unclamped": "global-view-bounds",  # offs read as is: the view may leave A
    "maybe-empty": "global-dim",  # no guard: a group may have no rows
    "base-misaligned": "global-address-align",  # the view starts 2 bytes off 16
    "device-stride": "global-stride",  # a row stride read from memory
}


def view_copy_kernel(variant: str = "ok"):
    if variant != "ok" and variant not in BROKEN:
        raise ValueError(f"unknown variant {variant!r}")
    per_cta = 128 if variant == "slot-overlap" else 512
    nbytes = TILE * K * 2
    unclamped = variant == "unclamped"
    guard = variant != "maybe-empty"
    shift = 1 if variant == "base-misaligned" else 0
    device_stride = variant == "device-stride"
    width = K // 2 if variant in ("base-misaligned", "device-stride") else K

    # fmt: off
    @T.inline
    def copies(A, B, smem, mbar, maps, cta, start, rows, stride):
        # The two odd variants read WIDTH columns: the view ends inside its rows.
        Ag = T.decl_buffer((rows[0], width), DTYPE, A.data, elem_offset=start[0] * K + shift,
                           layout=TileLayout(S[(rows[0], width):(stride, 1)]))
        Bg = T.decl_buffer((rows[0], K), DTYPE, B.data, elem_offset=start[0] * K,
                           layout=TileLayout(S[rows[0], K]))
        if variant == "no-slots":
            Tx.copy_async(smem[:, 0:width], Ag[0:TILE, 0:width], dispatch="tma",
                          mbar=mbar.ptr_to([0]),
                          oob="zero")
        elif variant == "shared-slot":
            Tx.copy_async(smem[:, 0:width], Ag[0:TILE, 0:width], dispatch="tma",
                          mbar=mbar.ptr_to([0]),
                          oob="zero", tensormap=mbar.ptr_to([0]))
        elif variant == "slot-misaligned":
            Tx.copy_async(smem[:, 0:width], Ag[0:TILE, 0:width], dispatch="tma",
                          mbar=mbar.ptr_to([0]),
                          oob="zero", tensormap=maps.ptr_to([cta * per_cta + 64]))
        elif variant == "slot-one-for-all":
            Tx.copy_async(smem[:, 0:width], Ag[0:TILE, 0:width], dispatch="tma",
                          mbar=mbar.ptr_to([0]),
                          oob="zero", tensormap=maps.ptr_to([0]))
        else:
            Tx.copy_async(smem[:, 0:width], Ag[0:TILE, 0:width], dispatch="tma",
                          mbar=mbar.ptr_to([0]),
                          oob="zero", tensormap=maps.ptr_to([cta * per_cta]))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(TILE * width * 2))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        Tx.copy_async(Bg[0:TILE, 0:K], smem[:, :], dispatch="tma", oob="skip",
                      tensormap=maps.ptr_to([cta * per_cta + 256]))
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group.read(0)

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle, O_ptr: T.handle, W_ptr: T.handle):
        A = T.match_buffer(A_ptr, (M, K), DTYPE, layout=TileLayout(S[M, K]))
        B = T.match_buffer(B_ptr, (M, K), DTYPE, layout=TileLayout(S[M, K]))
        offs = T.match_buffer(O_ptr, (GROUPS,), "int32")
        maps = T.match_buffer(W_ptr, (GROUPS * per_cta,), "uint8")
        T.device_entry()
        cta = T.cta_id([GROUPS])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((nbytes + 1024,), "uint8", scope="shared.dyn")
        smem = T.decl_buffer((TILE, K), DTYPE, dyn.data, layout=TileLayout(S[TILE, K]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=nbytes // 8)
        start = T.alloc_local((1,), "int32")
        end = T.alloc_local((1,), "int32")
        rows = T.alloc_local((1,), "int32")
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
            if unclamped:
                end[0] = offs[cta]
                start[0] = T.if_then_else(cta == 0, 0, offs[T.max(cta - 1, 0)])
            else:
                end[0] = T.min(T.max(offs[cta], 0), M)
                start[0] = T.min(T.if_then_else(cta == 0, 0,
                                                T.min(T.max(offs[T.max(cta - 1, 0)], 0), M)),
                                 end[0])
            rows[0] = end[0] - start[0]
            # A row stride read from memory (clamped into [width, K]: the view stays in A).
            stride = T.meta_var(T.min(T.max(offs[0], width), K) if device_stride else K)
            if guard:
                if rows[0] > 0:
                    copies(A, B, smem, mbar, maps, cta, start, rows, stride)
            else:
                copies(A, B, smem, mbar, maps, cta, start, rows, stride)
    # fmt: on
    return kernel
