"""Ordered split-K: C = A @ B from K parts without zeroing C first.

A split-K kernel (``GemmConfig(split_k=S)``) cuts each tile's K steps into S work units
that run on different workers at once. By default every part adds its product into C with
a TMA reduce-add store, so the kernel computes ``C += A @ B`` and a caller wanting
``C = A @ B`` must zero C first (a memset per launch). With ``split_k_ordered=True`` the
tile's part 0 *stores* its product and the other parts *add* theirs after it, so C's old
contents never matter:

* **Part 0**, after its TMA stores, waits until they are complete (``cp.async.bulk
  wait_group 0``, not ``.read``: the bytes must be in global memory, not just read out of
  shared memory), orders them before the flag with ``fence.proxy.async.global`` (the stores
  are async-proxy writes, the flag a generic one), and publishes the tile's flag with
  ``st.release.gpu`` of 1.
* **Every other part**'s storing thread spins on ``ld.acquire.gpu`` of the flag until it
  is set, fences the async proxy again (its reduce-add is an async-proxy read-modify-write
  that must follow the acquire), then issues its reduce-add stores, and counts itself out
  with ``atom.inc`` bounded by ``S - 1``: the last of the S - 1 adders wraps the flag back
  to 0, so every launch leaves the flags as it found them and back-to-back launches need no
  reset. The adders' reduce-adds may run in any order among themselves (each element's add
  is atomic).

The flags are one int32 per output tile (:attr:`~.gemm_config.GemmConfig.order_flags`),
the workspace :func:`.stream_k.workspace` allocates (zeros). Waiting cannot deadlock: the
parts of a tile are adjacent work units, so with at least S workers (``GemmConfig.check``)
they run on distinct workers, and a part waits only on a lower-numbered unit; with every
worker resident (``ctas`` at most the SM count, :func:`.stream_k.check_resident`), the
lowest-numbered waiting unit's part 0 is on a worker whose earlier units wait on nothing
lower, so it always gets there.
"""

from __future__ import annotations

from collections.abc import Callable

from tvm.script import tirx as T

from .gemm_config import GemmConfig


def tile_flag(cfg: GemmConfig, mb, nb):
    """Index of output tile (``mb``, ``nb``)'s flag (padding blocks of a cluster included)."""
    return mb * (cfg.n_groups * cfg.cluster_n) + nb


def make_order(cfg: GemmConfig, parts: int | None = None
               ) -> tuple[Callable[..., None], Callable[..., None]]:
    """``(wait_for_first, finish)`` for tiles of ``parts`` K parts (None: ``split_k``;
    the tail split passes ``tail_split``), run by a tile's storing thread:

    * ``wait_for_first(flags, flag, index)``: before the first reduce-add of a part other
      than 0, wait until part 0's stores of tile ``index`` are complete;
    * ``finish(flags, flag, index, part)``: after the tile's stores, part 0 publishes them;
      another part counts itself out (the last one resets the flag).

    ``flag`` is a one-element int32 local the wait spins on.
    """
    adders = (cfg.split_k if parts is None else parts) - 1

    # fmt: off
    @T.inline
    def wait_for_first(flags, flag, index):
        flag[0] = 0
        while flag[0] == 0:
            T.ptx.ld.acquire.gpu.global_.b32(flag[0], flags.ptr_to([index]))
        # The reduce-adds (async proxy) after the acquire (generic proxy).
        T.ptx.fence.proxy.async_.global_()

    @T.inline
    def finish(flags, flag, index, part):
        if part == 0:
            # The stores' bytes in global memory, ordered before the release of the flag.
            T.ptx.cp.async_.bulk.wait_group(0)
            T.ptx.fence.proxy.async_.global_()
            T.ptx.st.release.gpu.global_.b32(flags.ptr_to([index]), 1)
        else:
            # old >= adders wraps to 0: the last adder leaves the flag clean.
            T.ptx.atom.gpu.global_.inc.u32(flags.ptr_to([index]), T.uint32(adders))
    # fmt: on
    return wait_for_first, finish
