"""For each refusal rule: what a kernel author can change so that the copy plans."""

from __future__ import annotations

RULE_HINTS: dict[str, str] = {
    "direction": "copy between a global buffer and a shared / shared.dyn buffer",
    "dtype": "give both buffers the same element type",
    "extent": "make both regions static and hold the same number of elements",
    "layout": "declare both buffers with a TileLayout (or a TMA swizzle over one) that "
    "covers their shape",
    "layout-mismatch": "make the region shapes factor into common axes: one side's extents "
    "must divide the other's, innermost first (a [128, 128] tile from a [32, 4, 128] "
    "region does; [6, 4] from [4, 6] does not)",
    "shared-chain": "give the shared tile a stride-1 (row-major) innermost axis",
    "shared-injective": "use a shared layout that gives every element its own address",
    "innermost-stride": "copy along the global tensor's contiguous (stride-1) dimension, or "
    "transpose the shared tile so its innermost axis is that dimension",
    "swizzle-layout": "use a TMA swizzle: mma_shared_layout(dtype, 1|2|3, shape) or a "
    "ComposeLayout with 16-byte units, atom_len 3 and swizzle_inner",
    "swizzle-span": "make the tile's inner extent a multiple of the swizzle span "
    "(32/64/128 bytes) or pick the swizzle that matches the row width",
    "inner-box-16B": "make the innermost extent a multiple of 16 bytes",
    "box-dim": "make each copied extent split into boxes of at most 256 elements",
    "rank": "merge dimensions (contiguous regions) or split the copy into several copies",
    "global-stride": "pad the global rows so every stride is a multiple of 16 bytes",
    "global-dim": "keep every global dimension between 1 and 2^32 elements",
    "global-address-align": "allocate the global tensor 16-byte aligned",
    "tensormap-slot": "give the copy tensormap=<workspace>.ptr_to([cta, 0]): two 128-byte "
    "aligned slots per CTA in a global workspace (see tvm_tma.dispatch.device_view)",
    "region-bounds": "keep the region inside the tensor: declare the index's range "
    "(T.cta_id([n]) / loop extents) or guard it (t = cta + i * grid; if t < num_tiles:) so "
    "that start + extent <= size is provable; for an edge tile pass oob=\"zero\" / \"nan\" "
    "(loads) or oob=\"skip\" (stores, which must still start inside)",
    "oob": "pass oob=\"zero\" or \"nan\" on loads and oob=\"skip\" on stores; NaN fill needs "
    "a float16/bfloat16/float32/float64 tensor; a store crossing the end of the rows needs "
    "rows whose width is a multiple of 16 bytes",
    "inner-coordinate-16B": "start the region's innermost index on a multiple of 16 bytes",
    "smem-align-128": "put the shared tile (and each region start) on a 128-byte boundary of "
    "a shared.dyn allocation",
    "swizzle-base-period": "start the swizzled tile on a multiple of the swizzle period "
    "(256/512/1024 bytes) in its shared.dyn allocation",
    "shared-bounds": "keep the shared region inside the tile's shape (tile[0:64, :] of a "
    "64-row tile, not tile[32:96, :])",
    "shared-allocation": "declare the shared tile (and the mbarrier) inside the T.alloc_buffer "
    "it is a view of: elem_offset + the tile's bytes <= the allocation's bytes",
    "mbar-overlap": "put the mbarrier after the tiles in the shared arena (elem_offset past the "
    "last byte any copy writes)",
    "global-view-bounds": "declare the view inside the kernel argument it aliases (its shape, "
    "strides and elem_offset within the argument's)",
    "im2col": "declare the view with tvm_tma.conv.Conv2dGeometry (view_shape, "
    "view_elem_offset, view_layout over the NHWC argument) and copy tiles whose columns stay "
    "in one filter tap (K block dividing C), rows of at most 256 output pixels, oob=\"zero\" "
    "for a tile that runs past the last output pixel",
    "multicast": "declare the cluster (rank = T.cta_id_in_cluster([n])) and pass "
    "multicast=rank to split the tile among its CTAs, or a mask of its CTAs; give the tile an "
    "axis or outer box dimension that divides by n; a whole tile sent with a mask must reach "
    "each CTA once: issue it from one CTA (if rank == 0:), or let each CTA send its own slice",
    "reduce": "reduce on a shared->global copy, with an element type the operation is defined "
    "for (add: f16/bf16/f32/s32/u32/u64; inc/dec: u32; and/or/xor: 32/64-bit integers)",
    "config": "pass mbar= for global->shared copies only, and only the supported options",
    "mbar": "pass mbar=bars.ptr_to([i]) for an 8-byte aligned uint64 buffer in shared memory",
    "scope": "issue the copy from one thread (inside `if tid == 0:`), not a warp or CTA scope",
    "cache-hint": "pass cache_hint='evict_first' (or another L2 priority name) or a uint64 "
    "policy from createpolicy",
}
