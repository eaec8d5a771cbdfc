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
}


class IntrinError(ValueError):
    """A malformed TMA intrinsic call; ``rule`` names the violated constraint."""

    def __init__(self, rule: str, detail: str) -> None:
        if rule not in RULES:
            raise KeyError(f"unknown intrinsic rule {rule!r}")
        self.rule = rule
        super().__init__(f"[{rule}] {detail}")
