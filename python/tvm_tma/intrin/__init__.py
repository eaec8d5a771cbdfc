"""The cp.async.bulk / tensormap instruction surface as typed, verified TVM intrinsics.

Every builder checks its operands when the call is built and raises :class:`IntrinError`
naming the rule; the call is one opaque TIR op per family (printed ``T.tma.<name>``) that
the CUDA codegen renders to the exact PTX text. See ``docs/intrinsics.md``.
"""

from .bulk import (
    bulk_copy_cluster,
    bulk_load,
    bulk_store,
    commit_group,
    prefetch_descriptor,
    wait_group,
)
from .descriptor import (
    cp_fenceproxy,
    fence_acquire,
    fence_release,
    rebind,
    replace,
    replace_address,
    replace_dim,
    replace_stride,
    seed,
)
from .errors import RULES, IntrinError
from .host import encode_tiled
from .namespace import TmaNamespace, register_script_namespace
from .registry import FAMILIES
from .tensor_copy import load, prefetch, reduce, store

register_script_namespace()

__all__ = [
    "FAMILIES",
    "IntrinError",
    "RULES",
    "TmaNamespace",
    "bulk_copy_cluster",
    "bulk_load",
    "bulk_store",
    "commit_group",
    "cp_fenceproxy",
    "encode_tiled",
    "fence_acquire",
    "fence_release",
    "load",
    "prefetch",
    "prefetch_descriptor",
    "rebind",
    "reduce",
    "replace",
    "replace_address",
    "replace_dim",
    "replace_stride",
    "seed",
    "store",
    "wait_group",
]
