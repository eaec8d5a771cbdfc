"""Bad inputs to ``Tx.copy_async(..., dispatch="tma")`` (issue 15): every one is refused when
the kernel is compiled, with a named rule and the offending value, never a fault, a hang or a
silent copy. Shared regions and buffers outside their bounds, an mbarrier the copy would
overwrite, global views past their argument, operands and options of the wrong kind.

Each case is a kernel written as a kernel author would write it, with one mistake. CI
compiles each and checks the refusal; on a GPU machine the same cases are compiled there
too, and the safe controls run bit-exactly.
"""

from __future__ import annotations

import importlib.util
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from tvm_tma.testing.runner import assemble, compile_kernel

SM90A = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
TILE = 64 * 64 * 2  # bytes of one 64 x 64 float16 tile
SWIZZLE128 = "mma_shared_layout('float16', 3, ({shape}))"

TEMPLATE = '''
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128, 128), "float16", layout=TileLayout(S[128, 128]))
    B = T.match_buffer(B_ptr, (128, 128), "float16", layout=TileLayout(S[128, 128]))
    T.device_entry()
    cta = T.cta_id([1])
    tid = T.thread_id([128])
    dyn = T.alloc_buffer(({arena},), "uint8", scope="shared.dyn")
{decls}
    if tid == 0:
{body}
'''


@dataclass(frozen=True)
class Bad:
    """One kernel with one mistake: its declarations and copies, and what must refuse it."""

    name: str
    decls: str
    body: str
    rule: str
    value: str  # a substring of the refusal that names the offending value
    arena: int = TILE + 64


def _indent(text: str, spaces: int) -> str:
    return textwrap.indent(textwrap.dedent(text).strip("\n"), " " * spaces)


def build(decls: str, body: str, arena: int = TILE + 64):
    """The kernel of one case (written to a file: TVMScript parses source)."""
    source = TEMPLATE.format(arena=arena, decls=_indent(decls, 4), body=_indent(body, 8))
    path = Path("/tmp") / f"tvm_tma_bad_{abs(hash(source))}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


TILE_DECL = """
tile = T.decl_buffer((64, 64), "float16", dyn.data, layout=TileLayout(S[64, 64]))
mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=%d)
""" % (TILE // 8)
LOAD = 'Tx.copy_async({dst}, {src}, dispatch="tma", mbar=mbar.ptr_to([0]){extra})'
STORE = 'Tx.copy_async({dst}, {src}, dispatch="tma"{extra})'


def _load(dst, src, extra=""):
    return LOAD.format(dst=dst, src=src, extra=extra)


def _store(dst, src, extra=""):
    return STORE.format(dst=dst, src=src, extra=extra)


RING = """
ring = T.decl_buffer((3, 64, 64), "float16", dyn.data, layout=TileLayout(S[3, 64, 64]))
bars = T.decl_buffer((3,), "uint64", dyn.data, elem_offset=%d)
""" % (3 * TILE // 8)

CASES = [
    # ---- the shared region outside its buffer (shared-bounds) --------------------------
    Bad("region-rows-past-tile", TILE_DECL, _load("tile[32:96, 0:64]", "A[0:64, 0:64]"),
        "shared-bounds", "[32, 32 + 64) of tile dimension 0 is not provably inside [0, 64)"),
    Bad("region-cols-past-tile", TILE_DECL, _load("tile[0:64, 32:96]", "A[0:64, 0:64]"),
        "shared-bounds", "[32, 32 + 64) of tile dimension 1"),
    Bad("store-from-past-tile", TILE_DECL, _store("B[0:64, 0:64]", "tile[16:80, 0:64]"),
        "shared-bounds", "[16, 16 + 64) of tile dimension 0"),
    Bad("region-in-loop-past-tile", TILE_DECL,
        "for r in T.serial(8):\n    " + _load("tile[r * 8:r * 8 + 16, :]", "A[0:16, 0:64]"),
        "shared-bounds", "[r * 8, r * 8 + 16) of tile dimension 0"),
    Bad("ring-stage-past-ring", RING,
        "for s in T.serial(4):\n    "
        + _load("ring[s, :, :]", "A[0:64, 0:64]").replace("mbar.ptr_to([0])",
                                                          "bars.ptr_to([0])"),
        "shared-bounds", "[s, s + 1) of ring dimension 0 is not provably inside [0, 3)"),
    # ---- the shared buffer outside its allocation (shared-allocation) -------------------
    Bad("tile-bigger-than-allocation",
        'tile = T.decl_buffer((64, 64), "float16", dyn.data, layout=TileLayout(S[64, 64]))\n'
        'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=512)',
        _load("tile[:, :]", "A[0:64, 0:64]"), "shared-allocation",
        "shared buffer tile spans bytes [0, 8192) of its allocation dyn, which holds 4160",
        arena=4096 + 64),
    Bad("tile-offset-past-allocation",
        'tile = T.decl_buffer((64, 64), "float16", dyn.data, elem_offset=2048,\n'
        '                     layout=TileLayout(S[64, 64]))\n'
        'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=0)',
        _load("tile[:, :]", "A[0:64, 0:64]"), "shared-allocation",
        "spans bytes [4096, 12288) of its allocation dyn, which holds 8256"),
    Bad("swizzled-tile-past-allocation",
        'tile = T.decl_buffer((64, 64), "float16", dyn.data, elem_offset=1024,\n'
        f'                     layout={SWIZZLE128.format(shape="64, 64")})\n'
        'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=0)',
        _load("tile[:, :]", "A[0:64, 0:64]"), "shared-allocation",
        "spans bytes [2048, 10240)"),
    Bad("ring-past-allocation",
        'ring = T.decl_buffer((3, 64, 64), "float16", dyn.data, layout=TileLayout(S[3, 64, 64]))\n'
        'bars = T.decl_buffer((3,), "uint64", dyn.data, elem_offset=0)',
        "for s in T.serial(3):\n    " + _load("ring[s, :, :]", "A[0:64, 0:64]").replace(
            "mbar.ptr_to([0])", "bars.ptr_to([s])"),
        "shared-allocation", "shared buffer ring spans bytes [0, 24576)",
        arena=2 * TILE + 64),
    Bad("mbar-past-allocation",
        'tile = T.decl_buffer((64, 64), "float16", dyn.data, layout=TileLayout(S[64, 64]))\n'
        f'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset={TILE // 8 + 8})',
        _load("tile[:, :]", "A[0:64, 0:64]"), "shared-allocation",
        "mbarrier mbar spans bytes [8256, 8264) of its allocation dyn, which holds 8256"),
    # ---- the mbarrier inside the bytes the copy writes (mbar-overlap) -------------------
    Bad("mbar-inside-the-tile",
        'tile = T.decl_buffer((64, 64), "float16", dyn.data, layout=TileLayout(S[64, 64]))\n'
        'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=512)',
        _load("tile[:, :]", "A[0:64, 0:64]"), "mbar-overlap",
        "the mbarrier at byte 4096 of the shared allocation lies in the 8192 bytes"),
    Bad("mbar-inside-a-later-box",
        'tile = T.decl_buffer((64, 64), "float16", dyn.data, layout=TileLayout(S[64, 64]))\n'
        'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=960)',
        _load("tile[32:64, :]", "A[32:64, 0:64]"), "mbar-overlap",
        "the mbarrier at byte 7680"),
    Bad("mbar-in-one-ring-stage",
        'ring = T.decl_buffer((3, 64, 64), "float16", dyn.data, layout=TileLayout(S[3, 64, 64]))\n'
        f'bars = T.decl_buffer((3,), "uint64", dyn.data, elem_offset={2 * TILE // 8 + 16})',
        "for s in T.serial(3):\n    " + _load("ring[s, :, :]", "A[0:64, 0:64]").replace(
            "mbar.ptr_to([0])", "bars.ptr_to([0])"),
        "mbar-overlap", "when s = 2", arena=3 * TILE + 64),
    # ---- the mbarrier operand itself (mbar) ---------------------------------------------
    Bad("mbar-index-past-its-buffer", RING,
        _load("ring[0, :, :]", "A[0:64, 0:64]").replace("mbar.ptr_to([0])", "bars.ptr_to([3])"),
        "mbar", "indexes bars dimension 0 at 3, not provably inside [0, 3)",
        arena=3 * TILE + 64),
    Bad("mbar-constant", TILE_DECL,
        _load("tile[:, :]", "A[0:64, 0:64]").replace("mbar.ptr_to([0])", "8256"),
        "mbar", "mbar=8256 is a constant"),
    Bad("mbar-misaligned",
        TILE_DECL + 'half = T.decl_buffer((8,), "uint32", dyn.data, elem_offset=2065)',
        _load("tile[:, :]", "A[0:64, 0:64]").replace("mbar.ptr_to([0])", "half.ptr_to([0])"),
        "mbar", "8260 bytes into its shared allocation, not a multiple of 8", arena=TILE + 96),
    Bad("mbar-in-global-memory", TILE_DECL,
        _load("tile[:, :]", "A[0:64, 0:64]").replace("mbar.ptr_to([0])", "B.ptr_to([0, 0])"),
        "mbar", "points into 'global' memory"),
    # ---- global views past their kernel argument (global-view-bounds) -------------------
    Bad("view-taller-than-argument",
        TILE_DECL + 'V = T.decl_buffer((256, 128), "float16", A.data)',
        _load("tile[0:16, :]", "V[200:216, 0:64]"), "global-view-bounds",
        "global view V addresses bytes [0, 65536) of the data of kernel argument A, which "
        "holds bytes [0, 32768)"),
    Bad("view-offset-past-argument",
        TILE_DECL + 'V = T.decl_buffer((128, 128), "float16", A.data, elem_offset=64)',
        _load("tile[:, :]", "V[0:64, 0:64]"), "global-view-bounds",
        "addresses bytes [128, 32896)"),
    Bad("view-strides-past-argument",
        TILE_DECL + 'V = T.decl_buffer((64, 64), "float16", A.data,\n'
                    '                  layout=TileLayout(S[(64, 64):(512, 1)]))',
        _load("tile[:, :]", "V[0:64, 0:64]"), "global-view-bounds",
        "addresses bytes [0, 64640)"),
    Bad("store-view-past-argument",
        TILE_DECL + 'W = T.decl_buffer((192, 128), "float16", B.data)',
        _store("W[128:192, 0:64]", "tile[:, :]"), "global-view-bounds",
        "global view W addresses bytes [0, 49152) of the data of kernel argument B"),
    # ---- global regions (region-bounds) and edge options (oob) --------------------------
    Bad("region-past-the-tensor", TILE_DECL, _load("tile[:, :]", "A[96:160, 0:64]"),
        "region-bounds", "[96, 96 + 64) is not provably inside [0, 128)"),
    Bad("region-negative-start", TILE_DECL, _load("tile[:, :]", "A[-8:56, 0:64]"),
        "region-bounds", "[-8, -8 + 64)"),
    Bad("store-before-the-tensor", TILE_DECL,
        _store("B[-8:56, 0:64]", "tile[:, :]", ', oob="skip"'), "region-bounds",
        "may start before the tensor"),
    Bad("load-with-skip", TILE_DECL, _load("tile[:, :]", "A[96:160, 0:64]", ', oob="skip"'),
        "oob", "oob='skip' is not an out-of-bounds option of a global->shared copy"),
    Bad("oob-unknown", TILE_DECL, _load("tile[:, :]", "A[96:160, 0:64]", ', oob="clamp"'),
        "oob", "oob='clamp'"),
    # ---- the shared side's layout and alignment ----------------------------------------
    Bad("tile-off-128-bytes",
        'tile = T.decl_buffer((64, 64), "float16", dyn.data, elem_offset=8,\n'
        '                     layout=TileLayout(S[64, 64]))\n'
        f'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset={TILE // 8 + 8})',
        _load("tile[:, :]", "A[0:64, 0:64]"), "smem-align-128",
        "shared address offset 16 bytes", arena=TILE + 128),
    Bad("swizzle-off-period",
        'tile = T.decl_buffer((8, 64), "float16", dyn.data, elem_offset=64,\n'
        f'                     layout={SWIZZLE128.format(shape="8, 64")})\n'
        f'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset={TILE // 8})',
        _load("tile[:, :]", "A[0:8, 0:64]"), "swizzle-base-period",
        "starts 128 bytes into its allocation"),
    Bad("static-shared-tile",
        'tile = T.alloc_buffer((64, 64), "float16", scope="shared",\n'
        '                      layout=TileLayout(S[64, 64]))\n'
        'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=0)',
        _load("tile[:, :]", "A[0:64, 0:64]"), "smem-align-128", "allocation aligned to 64"),
    # A static mbarrier pushes the dynamic arena off its 1024-byte alignment (CUDA lays the
    # arena out after the static buffers: measured at byte 1088 on an H200).
    Bad("static-mbar-beside-the-dynamic-arena",
        'tile = T.decl_buffer((64, 64), "float16", dyn.data, layout=TileLayout(S[64, 64]))\n'
        'mbar = T.alloc_buffer((1,), "uint64", scope="shared")',
        _load("tile[:, :]", "A[0:64, 0:64]"), "shared-allocation",
        "declares static shared memory (mbar_ptr)"),
    # ---- operands and options of the wrong kind ----------------------------------------
    Bad("dtype-mismatch",
        'tile = T.decl_buffer((64, 64), "bfloat16", dyn.data, layout=TileLayout(S[64, 64]))\n'
        f'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset={TILE // 8})',
        _load("tile[:, :]", "A[0:64, 0:64]"), "dtype", "bfloat16 != src dtype float16"),
    Bad("missing-mbar", TILE_DECL, _store("tile[:, :]", "A[0:64, 0:64]"), "config",
        "needs mbar="),
    Bad("mbar-on-a-store", TILE_DECL,
        _store("B[0:64, 0:64]", "tile[:, :]", ", mbar=mbar.ptr_to([0])"), "config",
        "mbar is only for global->shared copies"),
    Bad("unknown-option", TILE_DECL,
        _load("tile[:, :]", "A[0:64, 0:64]", ", multicast_mask=3"), "config",
        "multicast_mask"),
    Bad("cta-group-2", TILE_DECL, _load("tile[:, :]", "A[0:64, 0:64]", ", cta_group=2"),
        "config", "cta_group=2"),
    Bad("cache-hint-name", TILE_DECL,
        _load("tile[:, :]", "A[0:64, 0:64]", ", cache_hint='evict_sometimes'"), "cache-hint",
        "cache_hint='evict_sometimes'"),
    Bad("cache-hint-32-bit", TILE_DECL,
        _load("tile[:, :]", "A[0:64, 0:64]", ", cache_hint=T.uint32(7)"), "cache-hint",
        "uint32"),
    Bad("cache-hint-float", TILE_DECL,
        _load("tile[:, :]", "A[0:64, 0:64]", ", cache_hint=T.float32(1.5)"), "cache-hint",
        "float32"),
    Bad("local-destination",
        'regs = T.alloc_buffer((64, 64), "float16", scope="local")\n'
        f'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset={TILE // 8})',
        _load("regs[:, :]", "A[0:64, 0:64]"), "direction", "dst local"),
    Bad("global-to-global", TILE_DECL, _store("B[0:64, 0:64]", "A[0:64, 0:64]"), "direction",
        "src global, dst global"),
    Bad("reshape-that-does-not-factor",
        'tile = T.decl_buffer((24, 64), "float16", dyn.data, layout=TileLayout(S[24, 64]))\n'
        f'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset={TILE // 8})',
        _load("tile[0:24, 0:32]", "A[0:32, 0:24]"), "layout-mismatch",
        "shared iterator of extent 32 and global extent 24"),
]
# Regions of different sizes are refused by TVMScript's parser itself ("dst payload ... !=
# src payload ..."), before any dispatch: they are not listed.


def _refusal(case: Bad) -> str:
    func = build(case.decls, case.body, case.arena)
    with pytest.raises(Exception) as info:
        tvm.compile(tvm.IRModule({"main": func}), target=SM90A, tir_pipeline="tirx")
    return str(info.value)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_copy_is_refused_with_its_rule_and_value(case):
    message = _refusal(case)
    assert f"[{case.rule}]" in message, message[-1500:]
    assert case.value in message, message[-1500:]


def test_the_bad_inputs_cover_every_new_rule():
    rules = {case.rule for case in CASES}
    assert {"shared-bounds", "shared-allocation", "mbar-overlap", "global-view-bounds"} <= rules
    assert len(CASES) >= 40


# ---- safe neighbours of the cases above still plan -------------------------------------

SAFE = {
    # A 128B-swizzled box that starts inside an aligned tile (rows 3..67 of a 72-row tile):
    # the hardware swizzles by address, so only the tile's base must be on the period.
    "swizzled-box-inside-an-aligned-tile": (
        'tile = T.decl_buffer((72, 64), "float16", dyn.data,\n'
        f'                     layout={SWIZZLE128.format(shape="72, 64")})\n'
        f'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset={72 * 128 // 8})',
        _load("tile[3:67, :]", "A[0:64, 0:64]"), 72 * 128 + 64),
    # The mbarrier right after the bytes the copy writes.
    "mbar-right-after-the-box": (
        'tile = T.decl_buffer((64, 64), "float16", dyn.data, layout=TileLayout(S[64, 64]))\n'
        'mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=512)',
        _load("tile[0:32, :]", "A[0:32, 0:64]"), TILE + 64),
    # A view inside its argument, and a ring with its barriers after the stages.
    "view-inside-the-argument": (
        TILE_DECL + 'V = T.decl_buffer((64, 128), "float16", A.data, elem_offset=64 * 128)',
        _load("tile[:, :]", "V[0:64, 64:128]"), TILE + 64),
    # A static tile declared 1024-byte aligned (alignas(1024)) takes TMA, swizzled too.
    "static-tile-declared-aligned": (
        'tile = T.alloc_buffer((64, 64), "float16", scope="shared", align=1024,\n'
        f'                      layout={SWIZZLE128.format(shape="64, 64")})\n'
        'mbar = T.alloc_buffer((1,), "uint64", scope="shared")',
        _load("tile[:, :]", "A[0:64, 0:64]"), TILE + 64),
    "ring-with-barriers-after-it": (
        RING, "for s in T.serial(3):\n    " + _load("ring[s, :, :]", "A[0:64, 0:64]").replace(
            "mbar.ptr_to([0])", "bars.ptr_to([s])"), 3 * TILE + 64),
}


@pytest.mark.parametrize("name", sorted(SAFE))
def test_safe_neighbour_plans_and_assembles(name):
    decls, body, arena = SAFE[name]
    built = compile_kernel(build(decls, body, arena))
    assert built.tma_call_sites >= 1
    assert len(assemble(built.cuda_source)) > 0


@pytest.mark.gpu
def test_every_bad_copy_fails_to_compile_on_the_gpu_machine(capsys):
    """On the GPU machine: every case fails to compile (nothing reaches the GPU), and the
    swizzled box inside an aligned tile lands exactly where the layout says."""
    refused = sum(f"[{case.rule}]" in _refusal(case) for case in CASES)
    with capsys.disabled():
        print(f"\nbad copies refused at compile time: {refused} of {len(CASES)}")
    assert refused == len(CASES)


def swizzled_box_kernel():
    """Rows 0..64 of A land at rows 3..67 of a 128B-swizzled 72-row tile, and go back out."""
    from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout

    layout = mma_shared_layout("float16", 3, (72, 64))
    arena = 72 * 128

    # fmt: off
    @T.prim_func
    def swizzled_box(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (128, 128), "float16", layout=TileLayout(S[128, 128]))
        B = T.match_buffer(B_ptr, (128, 128), "float16", layout=TileLayout(S[128, 128]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((arena + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((72, 64), "float16", dyn.data, layout=layout)
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=arena // 8)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
            Tx.copy_async(tile[3:67, :], A[0:64, 0:64], dispatch="tma", mbar=mbar.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(8192))
            T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
            Tx.copy_async(B[0:64, 64:128], tile[3:67, :], dispatch="tma")
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return swizzled_box


def _copy_on_gpu(func, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(A, B after the kernel): A random, B poisoned first, both (128, 128) float16 bits."""
    import torch

    executable = compile_kernel(func).executable
    source = np.random.default_rng(seed).integers(0, 1 << 16, (128, 128), dtype=np.uint16)
    a = torch.from_numpy(source.view(np.int16)).cuda()
    b = torch.full((128, 128), 0x5A5A, dtype=torch.int16, device="cuda")
    executable["main"](a.view(torch.float16), b.view(torch.float16))
    torch.cuda.synchronize()
    return source, b.cpu().numpy().view(np.uint16)


@pytest.mark.gpu
def test_swizzled_box_inside_an_aligned_tile_is_exact_on_gpu():
    source, got = _copy_on_gpu(swizzled_box_kernel(), seed=9)
    want = np.full_like(source, 0x5A5A)
    want[0:64, 64:128] = source[0:64, 0:64]
    np.testing.assert_array_equal(got, want)


def static_tile_kernel():
    """A 128B-swizzled tile in static shared memory declared 1024-byte aligned, with a static
    mbarrier beside it: the tile's alignment is its own, so TMA may use it."""
    from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout

    layout = mma_shared_layout("float16", 3, (64, 64))

    # fmt: off
    @T.prim_func
    def static_tile(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (128, 128), "float16", layout=TileLayout(S[128, 128]))
        B = T.match_buffer(B_ptr, (128, 128), "float16", layout=TileLayout(S[128, 128]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        tile = T.alloc_buffer((64, 64), "float16", scope="shared", align=1024, layout=layout)
        mbar = T.alloc_buffer((1,), "uint64", scope="shared")
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
            Tx.copy_async(tile[:, :], A[64:128, 0:64], dispatch="tma", mbar=mbar.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(8192))
            T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
            Tx.copy_async(B[0:64, 64:128], tile[:, :], dispatch="tma")
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return static_tile


def test_static_tile_kernel_assembles():
    built = compile_kernel(static_tile_kernel())
    assert "__shared__ alignas(1024) half tile_ptr[4096];" in built.cuda_source
    assert built.tma_call_sites == 2 and len(assemble(built.cuda_source)) > 0


@pytest.mark.gpu
def test_static_tile_is_exact_on_gpu():
    source, got = _copy_on_gpu(static_tile_kernel(), seed=10)
    want = np.full_like(source, 0x5A5A)
    want[0:64, 64:128] = source[64:128, 0:64]
    np.testing.assert_array_equal(got, want)
