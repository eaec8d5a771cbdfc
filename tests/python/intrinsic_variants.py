"""The intrinsic variant matrix: every family x rank x mode x optional operand.

Each variant is (label, minimum arch, builder, expected PTX). The expected text is spelled
here from the PTX ISA syntax and the seed templates (000: descriptor operand ``l``,
coordinates ``r``, masks/offsets ``h``; modifier order .im2col, .multicast::cluster,
.L2::cache_hint), independently of the package's renderer.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm.script import tirx as T

from tvm_tma import intrin

REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")
SCOPES = ("cta", "cluster", "gpu", "sys")
HINT = 0x1000000000000000  # an L2 cache policy cookie (evict-normal)


@dataclass(frozen=True)
class Variant:
    label: str
    arch: int  # 90: sm_90a and sm_100a kernels; 100: sm_100a only
    build: object  # (operands) -> TIR call
    ptx: tuple[str, ...]  # every asm line it must render, in order


@dataclass(frozen=True)
class Operands:
    desc: object  # a global-memory descriptor address
    smem: object  # a shared address
    sdesc: object  # a shared::cta descriptor slot (128-byte aligned)
    mbar: object
    glob: object  # a global data address


def _coords(first: int, rank: int) -> str:
    return "{" + ", ".join(f"%{first + i}" for i in range(rank)) + "}"


def _tail(first: int, count: int) -> str:
    return "".join(f", %{first + i}" for i in range(count))


def _load_variants() -> list[Variant]:
    out = []
    for dst in ("shared::cluster", "shared::cta"):
        for rank in range(1, 6):
            for multicast in ((0, 1) if dst == "shared::cluster" else (0,)):
                for hint in (0, 1):
                    mods = (".multicast::cluster" if multicast else "") + (
                        ".L2::cache_hint" if hint else "")
                    text = (f"cp.async.bulk.tensor.{rank}d.{dst}.global"
                            f".mbarrier::complete_tx::bytes{mods} [%0], [%1, "
                            f"{_coords(2, rank)}], [%{2 + rank}]"
                            f"{_tail(3 + rank, multicast + hint)};")

                    def build(o, rank=rank, dst=dst, multicast=multicast, hint=hint):
                        return intrin.load(o.smem, o.desc, list(range(rank)), o.mbar, dst=dst,
                                           multicast_mask=3 if multicast else None,
                                           cache_hint=T.uint64(HINT) if hint else None,
                                           cta_group=0)

                    out.append(Variant(f"load-{dst}-{rank}d-mc{multicast}-hint{hint}", 90,
                                       build, (text,)))
    for mode, token in (("im2col", ".im2col"), ("im2col_w", ".im2col::w"),
                        ("im2col_w_128", ".im2col::w::128")):
        for rank in (3, 4, 5):
            for multicast in (0, 1):
                for hint in (0, 1):
                    n_off = rank - 2 if mode == "im2col" else 2
                    mods = token + ".mbarrier::complete_tx::bytes" + (
                        ".multicast::cluster" if multicast else "") + (
                        ".L2::cache_hint" if hint else "")
                    offsets = "{" + ", ".join(f"%{3 + rank + i}" for i in range(n_off)) + "}"
                    text = (f"cp.async.bulk.tensor.{rank}d.shared::cluster.global{mods} "
                            f"[%0], [%1, {_coords(2, rank)}], [%{2 + rank}], {offsets}"
                            f"{_tail(3 + rank + n_off, multicast + hint)};")

                    def build(o, rank=rank, mode=mode, n_off=n_off, multicast=multicast,
                              hint=hint):
                        return intrin.load(o.smem, o.desc, list(range(rank)), o.mbar, mode=mode,
                                           im2col_offsets=list(range(1, n_off + 1)),
                                           multicast_mask=1 if multicast else None,
                                           cache_hint=T.uint64(HINT) if hint else None,
                                           cta_group=0)

                    out.append(Variant(f"load-{mode}-{rank}d-mc{multicast}-hint{hint}",
                                       90 if mode == "im2col" else 100, build, (text,)))
    for group in (1, 2):
        text = (f"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                f".cta_group::{group} [%0], [%1, {{%2, %3}}], [%4];")
        out.append(Variant(f"load-cta_group{group}", 100,
                           lambda o, g=group: intrin.load(o.smem, o.desc, [0, 0], o.mbar,
                                                          cta_group=g), (text,)))
    return out


def _store_like_variants() -> list[Variant]:
    out = []
    for mode, token, ranks in (("tile", "", range(1, 6)),
                               ("im2col_no_offs", ".im2col_no_offs", (3, 4, 5))):
        for rank in ranks:
            for hint in (0, 1):
                h = ".L2::cache_hint" if hint else ""
                text = (f"cp.async.bulk.tensor.{rank}d.global.shared::cta{token}.bulk_group{h} "
                        f"[%0, {_coords(1, rank)}], [%{1 + rank}]{_tail(2 + rank, hint)};")

                def build(o, rank=rank, mode=mode, hint=hint):
                    return intrin.store(o.desc, list(range(rank)), o.smem, mode=mode,
                                        cache_hint=T.uint64(HINT) if hint else None)

                out.append(Variant(f"store-{mode}-{rank}d-hint{hint}", 90, build, (text,)))
    for op in REDUCE_OPS:
        for mode, token, ranks in (("tile", "", range(1, 6)),
                                   ("im2col_no_offs", ".im2col_no_offs", (3,))):
            for rank in ranks:
                hint = int(rank == 2)
                h = ".L2::cache_hint" if hint else ""
                text = (f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{op}{token}"
                        f".bulk_group{h} [%0, {_coords(1, rank)}], [%{1 + rank}]"
                        f"{_tail(2 + rank, hint)};")

                def build(o, op=op, rank=rank, mode=mode, hint=hint):
                    return intrin.reduce(op, o.desc, list(range(rank)), o.smem, mode=mode,
                                         cache_hint=T.uint64(HINT) if hint else None)

                out.append(Variant(f"reduce-{op}-{mode}-{rank}d", 90, build, (text,)))
    return out


def _prefetch_variants() -> list[Variant]:
    out = []
    for mode, token, ranks in (("tile", "", range(1, 6)), ("im2col", ".im2col", (3, 4, 5))):
        for rank in ranks:
            for hint in (0, 1):
                n_off = rank - 2 if mode == "im2col" else 0
                h = ".L2::cache_hint" if hint else ""
                offsets = (", {" + ", ".join(f"%{1 + rank + i}" for i in range(n_off)) + "}"
                           if n_off else "")
                text = (f"cp.async.bulk.prefetch.tensor.{rank}d.L2.global{token}{h} "
                        f"[%0, {_coords(1, rank)}]{offsets}{_tail(1 + rank + n_off, hint)};")

                def build(o, rank=rank, mode=mode, n_off=n_off, hint=hint):
                    return intrin.prefetch(o.desc, list(range(rank)), mode=mode,
                                           im2col_offsets=list(range(n_off)),
                                           cache_hint=T.uint64(HINT) if hint else None)

                out.append(Variant(f"prefetch-{mode}-{rank}d-hint{hint}", 90, build, (text,)))
    out.append(Variant("prefetch_descriptor", 90, lambda o: intrin.prefetch_descriptor(o.desc),
                       ("prefetch.tensormap [%0];",)))
    return out


def _bulk_variants() -> list[Variant]:
    out = []
    for multicast in (0, 1):
        for hint in (0, 1):
            mods = (".multicast::cluster" if multicast else "") + (
                ".L2::cache_hint" if hint else "")
            text = (f"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes{mods} "
                    f"[%0], [%1], %2, [%3]{_tail(4, multicast + hint)};")

            def build(o, multicast=multicast, hint=hint):
                return intrin.bulk_load(o.smem, o.glob, 256, o.mbar,
                                        multicast_mask=1 if multicast else None,
                                        cache_hint=T.uint64(HINT) if hint else None)

            out.append(Variant(f"bulk_load-mc{multicast}-hint{hint}", 90, build, (text,)))
    for hint in (0, 1):
        h = ".L2::cache_hint" if hint else ""
        text = f"cp.async.bulk.global.shared::cta.bulk_group{h} [%0], [%1], %2{_tail(3, hint)};"
        out.append(Variant(f"bulk_store-hint{hint}", 90,
                           lambda o, hint=hint: intrin.bulk_store(
                               o.glob, o.smem, 512, cache_hint=T.uint64(HINT) if hint else None),
                           (text,)))
    out.append(Variant(
        "bulk_copy_cluster", 90,
        lambda o: intrin.bulk_copy_cluster(T.uint32(1024), o.smem, 128, T.uint32(2048)),
        ("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes "
         "[%0], [%1], %2, [%3];",)))
    out.append(Variant("commit_group", 90, lambda o: intrin.commit_group(),
                       ("cp.async.bulk.commit_group;",)))
    for n in (0, 1, 7):
        for read in (False, True):
            text = f"cp.async.bulk.wait_group{'.read' if read else ''} {n};"
            out.append(Variant(f"wait_group-{n}-read{int(read)}", 90,
                               lambda o, n=n, read=read: intrin.wait_group(n, read), (text,)))
    return out


def _descriptor_variants() -> list[Variant]:
    out = []
    # Seed 000 templates, {0} = state space, {1} = decimal index, $ -> %.
    address = "tensormap.replace.tile.global_address.{0}.b1024.b64 [%0], %1;"
    dim = "tensormap.replace.tile.global_dim.{0}.b1024.b32 [%0], {1}, %1;"
    stride = "tensormap.replace.tile.global_stride.{0}.b1024.b64 [%0], {1}, %1;"
    for space in ("global", "shared::cta"):
        def desc(o, space=space):
            return o.desc if space == "global" else o.sdesc

        out.append(Variant(f"replace_address-{space}", 90,
                           lambda o, d=desc: intrin.replace_address(d(o), T.uint64(0)),
                           (address.format(space),)))
        for d in range(5):
            out.append(Variant(f"replace_dim-{space}-{d}", 90,
                               lambda o, d=d, g=desc: intrin.replace_dim(g(o), d, 64, rank=5),
                               (dim.format(space, d),)))
        for d in range(1, 5):
            out.append(Variant(f"replace_stride-{space}-{d}", 90,
                               lambda o, d=d, g=desc: intrin.replace_stride(g(o), d, 4096,
                                                                            rank=5),
                               (stride.format(space, d - 1),)))
        for rank in range(1, 6):
            lines = ["fence.proxy.tensormap::generic.acquire.gpu [%0], 128;",
                     address.format(space)]
            lines += [dim.format(space, i) for i in range(rank)]
            lines += [stride.format(space, i - 1) for i in range(1, rank)]
            lines.append("fence.proxy.tensormap::generic.release.gpu;")

            def build(o, rank=rank, g=desc):
                return intrin.rebind(g(o), T.uint64(0), [64] * rank, [4096 * (i + 1) for i in
                                                                      range(rank - 1)])

            out.append(Variant(f"rebind-{space}-{rank}d", 90, build, tuple(lines)))
    for scope in SCOPES:
        out.append(Variant(f"fence_acquire-{scope}", 90,
                           lambda o, s=scope: intrin.fence_acquire(o.desc, s),
                           (f"fence.proxy.tensormap::generic.acquire.{scope} [%0], 128;",)))
        out.append(Variant(f"fence_release-{scope}", 90,
                           lambda o, s=scope: intrin.fence_release(s),
                           (f"fence.proxy.tensormap::generic.release.{scope};",)))
        out.append(Variant(f"cp_fenceproxy-{scope}", 90,
                           lambda o, s=scope: intrin.cp_fenceproxy(o.desc, o.sdesc, s),
                           ("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic"
                            f".release.{scope}.sync.aligned [%0], [%1], 128;",)))
    moves = " ".join(f"ld.v2.b64 {{lo, hi}}, [%1+{o}]; st.global.v2.b64 [%0+{o}], {{lo, hi}};"
                     for o in range(0, 128, 16))
    out.append(Variant("seed", 90, lambda o: intrin.seed(o.desc, o.glob),
                       ("{ .reg .b64 lo, hi; " + moves + " }",)))
    return out


VARIANTS = (_load_variants() + _store_like_variants() + _prefetch_variants()
            + _bulk_variants() + _descriptor_variants())
