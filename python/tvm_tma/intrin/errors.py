"""Errors raised when an intrinsic call is built with operands the instruction cannot take."""

from __future__ import annotations

#: Every rule the intrinsic verifier enforces, with what it protects.
RULES: dict[str, str] = {
    "rank": "tensor instructions take rank 1..5 (im2col forms 3..5)",
    "coordinates": "the coordinate count must equal the rank",
    "im2col-offsets": "im2col loads and prefetches take rank-2 16-bit corner offsets",
    "mode": "the load/store/reduce/prefetch mode must exist for that instruction",
    "reduce-op": "the reduction must be add, min, max, inc, dec, and, or or xor",
    "multicast": "a multicast mask must be a 16-bit value and only loads into a cluster take one",
    "cache-hint": "the .L2::cache_hint modifier and the cache-policy operand go together",
    "operand-space": "shared operands must be shared memory, descriptors must not be",
    "ord": "a mutator's dimension index must lie inside the descriptor's rank",
    "stride-dim0": "dimension 0's stride is the element size and is not replaceable",
    "not-device-mutable": "only global address, dims and strides are mutable on the device",
    "scope": "fence and copy scopes are cta, cluster, gpu or sys",
    "wait-group": "wait_group takes a non-negative immediate count",
    "arch": "the instruction needs a newer GPU or PTX ISA than the target",
    "cluster-launch": "multicast writes other CTAs' shared memory: the kernel must be a cluster",
    "size": "bulk copy sizes are multiples of 16 bytes",
    "cta-group": "cta_group is 1 or 2 and exists from sm_100",
    "spec": "a raw intrinsic spec string must name known fields with legal values",
    "operand-type": "every operand has a class: 32-bit (16-bit for h operands) integers for "
                    "coordinates, sizes, counts and offsets, 64-bit integers for cache policies "
                    "and raw addresses, pointers or 64-bit addresses (never constants) for "
                    "tensor maps, shared and global data, mbarriers and descriptors",
}

#: The rules of a host encode (``T.tma.encode_tiled`` and every map the dispatch binds),
#: checked when the kernel is built on the arguments that are compile-time constants. All
#: but ``map-footprint`` are the C++ runtime's rules (src/tensormap_rules.cc), which check
#: the same arguments again at launch; ``operand-type`` is shared with the verifier.
HOST_RULES: dict[str, str] = {
    "rank": "1..5 dimensions (3..5 with interleave), and as many dims, box dims and element "
            "strides as the rank, and rank - 1 strides",
    "dtype": "the descriptor dtype must be one the driver knows",
    "enum": "interleave 0..2, swizzle 0..3, l2_promotion 0..3, oob_fill 0..1",
    "global-address-align": "the base address must be 16-byte aligned (32 with interleave 2)",
    "global-dim": "global dims lie in (0, 2^32]",
    "global-stride": "global strides are multiples of 16 bytes (32 with interleave 2) below 2^40",
    "box-dim": "box dims lie in 1..256",
    "element-stride": "element strides lie in 1..8",
    "inner-box-16B": "without interleave the inner box row is a multiple of 16 bytes",
    "swizzle-span": "the inner box row fits the swizzle span (32/64/128 bytes)",
    "interleave-swizzle": "interleave 2 (32B) needs swizzle 1 (32B)",
    "oob-fill-dtype": "NaN fill needs a float descriptor dtype",
    "map-footprint": "the bytes a map can reach lie inside the buffer it is encoded over",
    "operand-type": RULES["operand-type"],
}


class IntrinError(ValueError):
    """A malformed TMA intrinsic call; ``rule`` names the violated constraint."""

    def __init__(self, rule: str, detail: str) -> None:
        if rule not in RULES:
            raise KeyError(f"unknown intrinsic rule {rule!r}")
        self.rule = rule
        super().__init__(f"[{rule}] {detail}")


class EncodeError(IntrinError):
    """A host encode refused when the kernel is built; ``rule`` is one of ``HOST_RULES``
    (the C++ runtime's rule names, plus ``map-footprint``)."""

    def __init__(self, rule: str, detail: str) -> None:
        if rule not in HOST_RULES:
            raise KeyError(f"unknown host encode rule {rule!r}")
        self.rule = rule
        ValueError.__init__(self, f"[{rule}] {detail}")
