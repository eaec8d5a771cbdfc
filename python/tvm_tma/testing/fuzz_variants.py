"""The fuzz generator's variants of a case: a multicast load split among a cluster's CTAs, or
a store that is a tensor reduction.

It exists apart from :mod:`.fuzz_cases` so that the stream of plain cases stays what it was:
the variant of case ``index`` comes from a random stream of its own, so a plain case draws
exactly the numbers it always drew (a failure found before reproduces as the same case), and
a variant only fixes what the case's draw must respect (its direction, its dtype) and the
field it sets. It also holds the PTX ISA's table of reductions, which the oracle judges the
planner's refusals against.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: Shares of the stream that are multicast loads and reducing stores (the rest: plain).
MULTICAST_SHARE = 0.08
REDUCE_SHARE = 0.08
#: Share of the reducing stores given an (op, dtype) pair PTX does not define (refused).
UNDEFINED_PAIR_SHARE = 0.12
#: Cluster sizes a multicast case splits its tile among.
CLUSTER_SIZES = (2, 4)

#: The element types PTX defines each ``cp.reduce.async.bulk.tensor`` operation for (PTX ISA,
#: "cp.reduce.async.bulk.tensor"). Written from the ISA, not imported from the planner, so
#: that the oracle checks the planner's own table rather than repeating it.
PTX_REDUCE_TYPES: dict[str, tuple[str, ...]] = {
    "add": ("float16", "bfloat16", "float32", "int32", "uint32", "uint64"),
    "min": ("float16", "bfloat16", "int32", "uint32", "int64", "uint64"),
    "max": ("float16", "bfloat16", "int32", "uint32", "int64", "uint64"),
    "inc": ("uint32",),
    "dec": ("uint32",),
    "and": ("int32", "uint32", "int64", "uint64"),
    "or": ("int32", "uint32", "int64", "uint64"),
    "xor": ("int32", "uint32", "int64", "uint64"),
}
#: How often each op is drawn (add is what kernels use most; inc/dec have one type).
_OP_WEIGHTS = {"add": 4, "min": 2, "max": 2, "inc": 1, "dec": 1, "and": 1, "or": 1, "xor": 1}
#: Element bytes of the dtypes only reductions draw (plain cases draw ``fuzz_cases.DTYPES``).
REDUCE_ONLY_DTYPES: dict[str, int] = {"int32": 4, "uint32": 4, "int64": 8, "uint64": 8}


@dataclass(frozen=True)
class Variant:
    """What a case of this variant must be: ``direction``/``dtype`` None are drawn as for a
    plain case; ``cluster`` and ``reduce`` are the :class:`~.copy_cases.CopyCase` fields."""

    direction: str | None = None
    dtype: str | None = None
    cluster: int = 0
    reduce: str | None = None

    @property
    def name(self) -> str:
        """The variant in a word, for coverage tables."""
        if self.cluster:
            return f"multicast-{self.cluster}"
        return f"reduce-{self.reduce}" if self.reduce else "plain"


PLAIN = Variant()


def draw_variant(seed: int, index: int, every_dtype: dict[str, int]) -> Variant:
    """The variant of case ``index`` of stream ``seed`` (its own random stream).

    ``every_dtype`` lists the dtypes a case can have, so an undefined reduction pair can be
    any dtype the op is not defined for.
    """
    rng = random.Random(f"tvm-tma-fuzz-variant:{seed}:{index}")
    roll = rng.random()
    if roll < MULTICAST_SHARE:
        return Variant(direction="g2s", cluster=rng.choice(CLUSTER_SIZES))
    if roll < MULTICAST_SHARE + REDUCE_SHARE:
        return _reduce_variant(rng, every_dtype)
    return PLAIN


def _reduce_variant(rng: random.Random, every_dtype: dict[str, int]) -> Variant:
    """A reducing store: mostly a pair PTX defines, sometimes one it does not."""
    ops = list(_OP_WEIGHTS)
    op = rng.choices(ops, weights=[_OP_WEIGHTS[o] for o in ops])[0]
    defined = PTX_REDUCE_TYPES[op]
    if rng.random() < UNDEFINED_PAIR_SHARE:
        dtype = rng.choice(sorted(d for d in every_dtype if d not in defined))
    else:
        dtype = rng.choice(defined)
    return Variant(direction="s2g", dtype=dtype, reduce=op)


def reduction_defined(op: str, dtype: str) -> bool:
    """PTX defines the tensor reduction ``op`` on ``dtype`` (:data:`PTX_REDUCE_TYPES`)."""
    return dtype in PTX_REDUCE_TYPES.get(op, ())
