"""The keyword options of ``Tx.copy_async(..., dispatch="tma", **options)``."""

from __future__ import annotations

from dataclasses import dataclass

import tvm

from ..planner.errors import refuse
from ..planner.global_view import LOAD_OOB, STORE_OOB
from ..planner.proofs import Prover, as_int
from .facts import CLUSTER_KEY, CTA_KEY, FACTS_KEY, cluster_ranks_of
from .operands import read_mbar
from .roots import ROOT_KEYS
from .seed_options import (
    Multicast,
    read_l2_promotion,
    read_multicast,
    read_prefetch,
    read_reduce,
)

#: Options the variant understands; anything else is refused by name, never ignored.
SUPPORTED_OPTIONS = ("mbar", "cache_hint", "oob", "cta_group", "multicast", "reduce",
                     "use_tma_reduce", "prefetch", "l2_promotion", "tensormap")
#: Keys the parse hook writes (not options a kernel author passes).
CAPTURED_KEYS = (FACTS_KEY, CLUSTER_KEY, CTA_KEY, *ROOT_KEYS)
#: ``oob=`` values by direction: fill a load's out-of-bounds elements with zeros or NaN, or
#: drop a store's (a store writes nothing outside the tensor whatever it is told to fill).
OOB_OPTIONS = {"g2s": LOAD_OOB, "s2g": STORE_OOB}

#: ``cache_hint=<name>``: the L2 eviction priority the dispatch builds a policy for with
#: ``createpolicy.fractional.L2::<name>.b64`` (fraction 1.0: every line of the copy).
POLICY_NAMES = ("evict_first", "evict_last", "evict_normal", "evict_unchanged")


@dataclass(frozen=True)
class CopyOptions:
    mbar: object | None  # the mbarrier address a g2s copy completes on
    #: None, one of POLICY_NAMES, or a 64-bit policy expression (``createpolicy``'s result)
    cache_hint: object | None = None
    #: None (the region must lie inside the tensor) or one of OOB_OPTIONS[direction]
    oob: str | None = None
    #: Where a load lands beyond this CTA (None: only here)
    multicast: Multicast | None = None
    #: The tensor reduction a store performs (None: a plain store)
    reduce: str | None = None
    #: The load only prefetches the region into L2
    prefetch: bool = False
    #: The map's L2 promotion enum
    l2_promotion: int = 2
    #: Two global slots for a device-born map (a copy of a device-side view), as written;
    #: validated where the launch is known (:func:`.device_view.read_slots`)
    tensormap: object | None = None


def _read_cache_hint(value):
    """A policy name or a 64-bit expression; a 32-bit value cannot hold a policy."""
    if value is None:
        return None
    if isinstance(value, tvm.ir.StringImm):
        value = value.value
    if isinstance(value, str):
        if value not in POLICY_NAMES:
            raise refuse("cache-hint", f"cache_hint={value!r} is not an L2 eviction priority "
                         f"(one of {list(POLICY_NAMES)}, or a uint64 policy from createpolicy)")
        return value
    if isinstance(value, int):  # an encoded policy, e.g. CUTLASS's CacheHintSm90 values
        if not 0 <= value < 1 << 64:
            raise refuse("cache-hint", f"cache_hint={value} does not fit a uint64 policy")
        value = tvm.tirx.const(value, "uint64")
    dtype = str(getattr(value, "ty", None) or getattr(value, "dtype", ""))
    if dtype not in ("uint64", "int64"):
        raise refuse("cache-hint", f"cache_hint must be a 64-bit cache policy (uint64), got "
                     f"{value!r} of type {dtype or type(value).__name__}")
    return value


def read_options(config, direction: str, prover=None) -> CopyOptions:
    """Validate the options for a copy in ``direction`` ("g2s" / "s2g")."""
    unknown = sorted(str(key) for key in config
                     if str(key) not in SUPPORTED_OPTIONS and str(key) not in CAPTURED_KEYS)
    if unknown:
        raise refuse(
            "config",
            f"unsupported option(s) {unknown} for dispatch='tma' (supported: "
            f"{list(SUPPORTED_OPTIONS)})",
        )
    prover = prover if prover is not None else Prover()
    mbar = config.get("mbar")
    prefetch = read_prefetch(config.get("prefetch"), direction, mbar)
    if direction == "g2s" and mbar is None and not prefetch:
        raise refuse(
            "config",
            "a global->shared TMA copy needs mbar=<mbarrier address>: the hardware signals "
            "completion on it",
        )
    if direction == "s2g" and mbar is not None:
        raise refuse(
            "config",
            "mbar is only for global->shared copies; a shared->global copy completes through "
            "cp.async.bulk.commit_group / wait_group",
        )
    if mbar is not None:
        mbar = read_mbar(mbar, prover)
    _read_cta_group(config.get("cta_group"))
    multicast = read_multicast(config.get("multicast"), direction, cluster_ranks_of(config),
                               prover)
    if multicast is not None and prefetch:
        raise refuse("multicast", "a prefetch brings data into L2 only: there is nothing to "
                     "multicast to shared memory")
    return CopyOptions(mbar=mbar, cache_hint=_read_cache_hint(config.get("cache_hint")),
                       oob=_read_oob(config.get("oob"), direction), multicast=multicast,
                       reduce=read_reduce(config, direction), prefetch=prefetch,
                       l2_promotion=read_l2_promotion(config.get("l2_promotion")),
                       tensormap=config.get("tensormap"))


def _read_cta_group(value) -> None:
    """``cta_group=1``: one CTA issues and receives the copy, which is what every copy of this
    variant does (on sm_100 the load carries ``.cta_group::1``); kernels written for
    upstream's variants pass it. A paired-CTA copy (2) is not supported."""
    if value is None:
        return
    number = as_int(value) if not isinstance(value, bool) else None
    if number != 1:
        raise refuse("config", f"cta_group={value!r}: only cta_group=1 (one CTA) is supported; "
                     "paired-CTA (cta_group=2) copies are not")


def _read_oob(value, direction: str) -> str | None:
    """``oob=``: a name from OOB_OPTIONS for the copy's direction."""
    if value is None:
        return None
    if isinstance(value, tvm.ir.StringImm):
        value = value.value
    allowed = OOB_OPTIONS[direction]
    if value in allowed:
        return value
    kind = "global->shared" if direction == "g2s" else "shared->global"
    other = next((d for d, names in OOB_OPTIONS.items() if value in names), None)
    hint = "" if other is None else (
        f" ({value!r} is for {'global->shared' if other == 'g2s' else 'shared->global'} copies)")
    raise refuse("oob", f"oob={value!r} is not an out-of-bounds option of a {kind} copy{hint}; "
                 f"it takes one of {list(allowed)}")
