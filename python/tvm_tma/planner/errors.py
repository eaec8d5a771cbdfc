"""Why a copy cannot become a TMA plan.

Every refusal names one rule from :data:`RULES`, so a kernel author (and a test) can tell
*which* hardware or safety constraint was violated without parsing prose.
"""

from __future__ import annotations

RULES: dict[str, str] = {
    "direction": "TMA copies global<->shared; other scope pairs are not TMA copies",
    "dtype": "both sides of the copy must have the same element type",
    "extent": "copy extents must be static and both regions must hold as many elements",
    "layout": "both buffers need a memory layout the planner can read",
    "layout-mismatch": "the two regions' row-major element orders (and layouts) do not factor "
    "into common axes",
    "shared-chain": "no shared-memory axis has stride 1, so no dense TMA box can be formed",
    "shared-injective": "the shared layout maps two elements to one address",
    "innermost-stride": "the box's innermost axis must be contiguous (stride 1) in global memory",
    "swizzle-layout": "the shared swizzle must be one of the TMA patterns (16-byte units, 8 rows)",
    "swizzle-span": "with swizzle, the inner box must fill exactly the 32/64/128-byte span",
    "inner-box-16B": "the inner box must be a multiple of 16 bytes",
    "box-dim": "every box dimension must be 1..256 elements",
    "rank": "a tiled tensor map has at most 5 dimensions",
    "global-stride": "global strides must be multiples of 16 bytes and below 2^40",
    "global-dim": "global dimensions must be in (0, 2^32]",
    "global-address-align": "the global base address must be 16-byte aligned",
    "region-bounds": "the copied region must provably lie inside the global tensor (or, "
    "with oob=, may cross its end but a store never its start)",
    "oob": "oob= is \"zero\" or \"nan\" (floating types) on global->shared and \"skip\" "
    "(or \"zero\"/\"nan\") on shared->global, and must be honoured exactly",
    "inner-coordinate-16B": "each box must start on a 16-byte boundary along dimension 0 "
    "(the H100 faults with an illegal instruction otherwise)",
    "smem-align-128": "every issue's shared address must be provably 128-byte aligned",
    "swizzle-base-period": "a swizzled shared buffer must start on the swizzle pattern period",
    "shared-bounds": "the shared region must lie inside its shared buffer",
    "shared-allocation": "a shared buffer (and the mbarrier) must lie inside the shared "
    "allocation that holds its data",
    "mbar-overlap": "the copy must not write over the mbarrier it completes on",
    "global-view-bounds": "a global view must lie inside the kernel argument whose data it "
    "aliases",
    "multicast": "a multicast load needs a cluster kernel and a mask of its CTAs, a tile "
    "split among the CTAs needs equal pieces that stay 128-byte aligned, and a whole tile "
    "sent with a mask must reach each CTA once",
    "reduce": "a tensor reduction is a store, and PTX defines each operation for some element "
    "types only",
    "im2col": "a copy from a convolution's GEMM view (an im2col view of an NHWC activation) "
    "must be a load of whole taps' channel blocks over a run of output pixels, with the "
    "corners, offsets and strides a rank-4 im2col map can hold",
    "config": "an option of the copy is missing, misplaced or unsupported",
    "mbar": "the mbarrier operand must be an 8-byte aligned address in shared memory",
    "scope": "TMA is issued by a single thread",
    "tensormap-slot": "a copy of a device-side view (a map rebound on the device) needs "
    "tensormap=: two 128-byte aligned slots of a global workspace that its CTA alone uses",
    "cache-hint": "an L2 cache hint is an eviction priority name or a 64-bit createpolicy value",
}


class PlanError(ValueError):
    """A copy that TMA cannot (or cannot provably safely) perform.

    ``rule`` is a key of :data:`RULES`; the message repeats it and names the offending value.
    """

    def __init__(self, rule: str, detail: str) -> None:
        if rule not in RULES:
            raise KeyError(f"unknown planner rule {rule!r}")
        self.rule = rule
        self.detail = detail
        super().__init__(f"[{rule}] {detail}")


def refuse(rule: str, detail: str) -> PlanError:
    """Build the error for ``rule`` (callers ``raise refuse(...)`` so tracebacks stay short)."""
    return PlanError(rule, detail)
