"""What cluster multicast buys: the two CTAs of each cluster consume the same tiles.

One kernel, two variants that differ in one option of one ``copy_async``:

- ``plain``: each CTA of the 2-CTA cluster loads every tile itself (two global requests
  for the same bytes, one per CTA);
- ``multicast``: each CTA loads half of every tile with ``multicast=rank`` and the TMA
  engine writes both halves into both CTAs' shared memory (one global request per tile
  per cluster).

Each cluster streams ``--tiles`` tiles of 64 x 128 uint16 (16 KiB) through a ring of
stages; every CTA reads each tile it receives (an XOR checksum per thread, checked against
numpy before timing) and releases the stage in both CTAs (the peer's multicast writes into
it), exactly as the B operand of a 2-CTA GEMM is consumed (examples/cluster_multicast.py).
Both variants run the same synchronization.

Two pipelines: ``4stages-readsall`` (every thread reads its 64 elements of each tile: the
consumer sets the pace) and ``8stages-readsone`` (one element per thread per tile and twice
the bytes in flight: the copies set the pace). Two footprints: ``dram`` (every tile
distinct: the data streams from DRAM) and ``l2`` (the clusters cycle over 1024 tiles,
16 MiB: the data stays in L2).

Reported per variant, from the tile counts: bytes landed in shared memory (useful bytes),
global bytes the TMA requested, their ratio (requested per useful byte: 1.0 plain, 0.5
multicast), and the measured median time of one launch with the useful bandwidth it
implies; the ratio of the two times is measured in the same run. ``ncu --metrics
dram__bytes_read.sum,lts__t_requests_srcunit_tex_op_read.sum python
benchmarks/multicast.py --profile multicast-dram-8stages-readsone`` measures what the hardware read.

Usage: python benchmarks/multicast.py [--compile-only] [--runs 30] [--tiles 256]
       [--json out.json] [--profile NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

import tvm_tma  # noqa: F401  (registers dispatch="tma")
from tvm_tma.testing.runner import assemble, compile_kernel
from tvm_tma.testing.timing import per_launch_median

TILE_ROWS, TILE_COLS = 64, 128
TILE_BYTES = TILE_ROWS * TILE_COLS * 2
PER_THREAD = TILE_ROWS * TILE_COLS // 128  # elements of a tile per thread
CLUSTER = 2
THREADS = 128
BARRIER_BYTES = 1024
L2_TILES = 1024  # 16 MiB: well inside an H100's 50 MiB L2


@dataclass(frozen=True)
class Stream:
    """``clusters`` clusters, each consuming ``tiles`` tiles; tile ``t`` of cluster ``c`` is
    ``(t * clusters + c) % distinct`` of A (neighbouring clusters read neighbouring tiles)."""

    clusters: int
    tiles: int
    distinct: int
    multicast: bool
    #: Ring stages per CTA (16 KiB each).
    stages: int = 4
    #: "all": every thread reads its 64 elements of each tile (the consumer sets the pace);
    #: "one": one element per thread per tile (the copies set the pace).
    reads: str = "all"

    @property
    def footprint(self) -> str:
        return "l2" if self.distinct == L2_TILES else "dram"

    @property
    def config(self) -> str:
        return f"{self.footprint}-{self.stages}stages-reads{self.reads}"

    @property
    def name(self) -> str:
        return f"{'multicast' if self.multicast else 'plain'}-{self.config}"

    @property
    def useful_bytes(self) -> int:
        """Bytes landed in shared memory: every CTA receives every tile of its cluster."""
        return self.clusters * CLUSTER * self.tiles * TILE_BYTES

    @property
    def requested_bytes(self) -> int:
        """Global bytes the TMA engine is asked for."""
        per_tile = TILE_BYTES if self.multicast else CLUSTER * TILE_BYTES
        return self.clusters * self.tiles * per_tile


def stream_kernel(stream: Stream):
    clusters, tiles, distinct = stream.clusters, stream.tiles, stream.distinct
    share, stages, every = stream.multicast, stream.stages, stream.reads == "all"

    # fmt: off
    @T.prim_func
    def cluster_stream(A_ptr: T.handle, Out_ptr: T.handle):
        A = T.match_buffer(A_ptr, (distinct * TILE_ROWS, TILE_COLS), "uint16",
                           layout=TileLayout(S[distinct * TILE_ROWS, TILE_COLS]))
        Out = T.match_buffer(Out_ptr, (clusters * CLUSTER, THREADS), "uint32",
                             layout=TileLayout(S[clusters * CLUSTER, THREADS]))
        T.device_entry()
        cluster = T.cluster_id([clusters])
        rank = T.cta_id_in_cluster([CLUSTER])
        tid = T.thread_id([THREADS])
        dyn = T.alloc_buffer((BARRIER_BYTES + stages * TILE_BYTES,), "uint8",
                             scope="shared.dyn")
        full = T.decl_buffer((stages,), "uint64", dyn.data, elem_offset=0)
        empty = T.decl_buffer((stages,), "uint64", dyn.data, elem_offset=stages)
        ring = T.decl_buffer((stages, TILE_ROWS, TILE_COLS), "uint16", dyn.data,
                             elem_offset=BARRIER_BYTES // 2,
                             layout=TileLayout(S[stages, TILE_ROWS, TILE_COLS]))
        check = T.alloc_local((1,), "uint32")
        peer_empty = T.alloc_local((1,), "uint32")
        if tid == 0:
            for s in T.serial(stages):
                T.ptx.mbarrier.init.shared.b64(full.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(empty.ptr_to([s]), T.uint32(CLUSTER))
        T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cluster_sync()
        if tid == 0:
            for s in T.serial(stages):
                row = T.meta_var((s * clusters + cluster) % distinct * TILE_ROWS)
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(full.ptr_to([s]),
                                                           T.uint32(TILE_BYTES))
                if share:
                    Tx.copy_async(ring[s, :, :], A[row:row + TILE_ROWS, :], dispatch="tma",
                                  mbar=full.ptr_to([s]), multicast=rank)
                else:
                    Tx.copy_async(ring[s, :, :], A[row:row + TILE_ROWS, :], dispatch="tma",
                                  mbar=full.ptr_to([s]))
        check[0] = T.uint32(0)
        for t in T.serial(tiles):
            s = T.meta_var(t % stages)
            T.cuda.mbarrier_wait(full.ptr_to([s]), t // stages % 2)
            if every:
                for j in T.serial(PER_THREAD):
                    i = T.meta_var(j * THREADS + tid)
                    check[0] = check[0] ^ T.Cast("uint32",
                                                 ring[s, i // TILE_COLS, i % TILE_COLS])
            else:
                i = T.meta_var(tid * PER_THREAD + t % PER_THREAD)
                check[0] = check[0] ^ T.Cast("uint32", ring[s, i // TILE_COLS, i % TILE_COLS])
            T.cuda.cta_sync()
            if tid == 0:
                for peer in T.serial(CLUSTER):  # the stage is free in both CTAs' eyes
                    T.ptx.mapa.shared__cluster.u32(
                        peer_empty[0], T.cuda.cvta_generic_to_shared(empty.ptr_to([s])),
                        T.uint32(peer))
                    T.ptx.mbarrier.arrive.release.cluster.shared__cluster.b64(peer_empty[0])
                if t + stages < tiles:
                    row = T.meta_var(((t + stages) * clusters + cluster) % distinct * TILE_ROWS)
                    T.cuda.mbarrier_wait_acquire_cluster(empty.ptr_to([s]), t // stages % 2)
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(full.ptr_to([s]),
                                                               T.uint32(TILE_BYTES))
                    if share:
                        Tx.copy_async(ring[s, :, :], A[row:row + TILE_ROWS, :],
                                      dispatch="tma", mbar=full.ptr_to([s]), multicast=rank)
                    else:
                        Tx.copy_async(ring[s, :, :], A[row:row + TILE_ROWS, :],
                                      dispatch="tma", mbar=full.ptr_to([s]))
        Out[cluster * CLUSTER + rank, tid] = check[0]
        T.cuda.cluster_sync()
    # fmt: on
    return cluster_stream


def expected_checksums(stream: Stream, data: np.ndarray) -> np.ndarray:
    """Thread ``tid`` of each CTA XORs elements ``tid + 128 j`` of every tile it receives
    (``reads="all"``), or element ``64 tid + t % 64`` of its ``t``-th tile (``"one"``)."""
    tiles = data.reshape(stream.distinct, PER_THREAD, THREADS)
    out = np.zeros((stream.clusters * CLUSTER, THREADS), dtype=np.uint32)
    for cluster in range(stream.clusters):
        order = [(t * stream.clusters + cluster) % stream.distinct for t in range(stream.tiles)]
        if stream.reads == "all":
            checksum = np.bitwise_xor.reduce(
                np.bitwise_xor.reduce(tiles[order], axis=1), axis=0)
        else:
            flat = data.reshape(stream.distinct, THREADS, PER_THREAD)
            picked = flat[order, :, [t % PER_THREAD for t in range(stream.tiles)]]
            checksum = np.bitwise_xor.reduce(picked, axis=0)
        out[cluster * CLUSTER:(cluster + 1) * CLUSTER] = checksum.astype(np.uint32)
    return out


def streams(clusters: int, tiles: int) -> list[Stream]:
    """Both variants of each configuration: consumer-paced (4 stages, every element read)
    and copy-paced (8 stages, one element per thread), each from DRAM and from L2."""
    return [Stream(clusters, tiles, distinct, multicast, stages, reads)
            for stages, reads in ((4, "all"), (8, "one"))
            for distinct in (clusters * tiles, L2_TILES) for multicast in (False, True)]


def measure(found: list[tuple[Stream, object]], runs: int) -> list[dict]:
    import torch

    rows = []
    for stream, built in found:
        rng = np.random.default_rng(stream.distinct)
        data = rng.integers(0, 1 << 16, size=(stream.distinct * TILE_ROWS, TILE_COLS),
                            dtype=np.uint16)
        device = tvm.cuda(0)
        source = tvm.runtime.tensor(data, device)
        out = tvm.runtime.tensor(np.full((stream.clusters * CLUSTER, THREADS), 0xFFFFFFFF,
                                         dtype=np.uint32), device)
        kernel = built.executable["main"]
        kernel(source, out)
        device.sync()
        exact = np.array_equal(out.numpy(), expected_checksums(stream, data))
        ms = per_launch_median(torch, lambda: kernel(source, out), runs, warmup=3)
        rows.append({
            "variant": stream.name, "exact": exact, "ms": round(ms, 4),
            "useful_GB": stream.useful_bytes / 1e9,
            "requested_GB": stream.requested_bytes / 1e9,
            "requested_per_useful": stream.requested_bytes / stream.useful_bytes,
            "useful_GBps": round(stream.useful_bytes / ms / 1e6, 1),
        })
    for row in rows:  # plain / multicast of the same configuration, measured in this run
        config = row["variant"].split("-", 1)[1]
        plain = next((r for r in rows if r["variant"] == f"plain-{config}"), None)
        if plain is not None:  # absent when --profile launches one variant alone
            row["time_vs_plain"] = round(row["ms"] / plain["ms"], 3)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--tiles", type=int, default=256, help="tiles per cluster")
    parser.add_argument("--clusters", type=int, default=0, help="0: one CTA per SM")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--profile", help="launch only this variant, once (for ncu)")
    args = parser.parse_args(argv)
    clusters = args.clusters or (_sm_count() // CLUSTER if not args.compile_only else 66)
    chosen = [s for s in streams(clusters, args.tiles)
              if args.profile is None or s.name == args.profile]
    found = []
    for stream in chosen:
        built = compile_kernel(stream_kernel(stream))
        calls = built.tma_call_sites
        print(f"{stream.name}: {calls} TMA call sites, "
              f"{len(assemble(built.cuda_source))} bytes of sm_90a cubin")
        found.append((stream, built))
    if args.compile_only:
        return 0
    rows = measure(found, 1 if args.profile else args.runs)
    print(f"{clusters} clusters of {CLUSTER} CTAs, {args.tiles} tiles of {TILE_BYTES} B each")
    print(f"{'variant':34} {'exact':6} {'ms':>8} {'req/useful':>10} {'useful GB/s':>11} "
          f"{'time vs plain':>13}")
    for row in rows:
        print(f"{row['variant']:34} {row['exact']!s:6} {row['ms']:8.3f} "
              f"{row['requested_per_useful']:10.2f} {row['useful_GBps']:11.1f} "
              f"{row.get('time_vs_plain', float('nan')):13.3f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(row["exact"] for row in rows) else 1


def _sm_count() -> int:
    import torch

    return torch.cuda.get_device_properties(0).multi_processor_count


if __name__ == "__main__":
    sys.exit(main())
