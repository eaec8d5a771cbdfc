"""``T.tma.<name>``: the intrinsics in TVMScript, accepting their printed form too.

The printer writes a call as ``T.tma.load("rank=2,mode=tile,...", *operands)``; parsing that
must rebuild the identical call (and re-verify it), while kernel authors write the keyword
form ``T.tma.load(dst, desc, [x, y], mbar, multicast_mask=m)``.
"""

from __future__ import annotations

import functools

from . import bulk, descriptor, host, tensor_copy
from .registry import FAMILIES

#: script name -> friendly builder
BUILDERS = {
    "load": tensor_copy.load,
    "store": tensor_copy.store,
    "reduce": tensor_copy.reduce,
    "prefetch": tensor_copy.prefetch,
    "prefetch_descriptor": bulk.prefetch_descriptor,
    "commit_group": bulk.commit_group,
    "wait_group": bulk.wait_group,
    "bulk_load": bulk.bulk_load,
    "bulk_store": bulk.bulk_store,
    "bulk_copy_cluster": bulk.bulk_copy_cluster,
    "replace_address": descriptor.replace_address,
    "replace_dim": descriptor.replace_dim,
    "replace_stride": descriptor.replace_stride,
    "fence_acquire": descriptor.fence_acquire,
    "fence_release": descriptor.fence_release,
    "cp_fenceproxy": descriptor.cp_fenceproxy,
    "rebind": descriptor.rebind,
    "seed": descriptor.seed,
}


def _accepting_printed_form(name: str, builder):
    family = FAMILIES[name]

    @functools.wraps(builder)
    def call(*args, **kwargs):
        if args and isinstance(args[0], str) and "=" in args[0]:
            return family.call_raw(args[0], list(args[1:]), kwargs.get("arch"))
        return builder(*args, **kwargs)

    return call


class TmaNamespace:
    """The object behind ``T.tma``."""

    replace = staticmethod(descriptor.replace)
    encode_tiled = staticmethod(host.encode_tiled)


for _name, _builder in BUILDERS.items():
    setattr(TmaNamespace, _name, staticmethod(_accepting_printed_form(_name, _builder)))

_registered = False


def register_script_namespace() -> None:
    global _registered
    if _registered:
        return
    from tvm.tirx.script.builder.ir import register_script_namespace as register

    register("tma", TmaNamespace)
    _registered = True
