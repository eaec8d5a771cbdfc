"""Tests of the C++ host runtime (libtvm_tma_runtime.so): the tensor-map rule checks.

Everything except the tests marked ``needs_driver`` runs without a GPU: ``validate_tiled``
only checks the rules, and ``encode_tiled`` checks them before it touches the driver.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, replace

import pytest
import tvm_ffi
from runtime_buffers import MAP, MAP_STORAGE, cuda_tensor

from tvm_tma import _runtime

_runtime.load_runtime()

validate_tiled = tvm_ffi.get_global_func("tvm_tma.validate_tiled")
encode_tiled = tvm_ffi.get_global_func("tvm_tma.encode_tiled")
encode_count = tvm_ffi.get_global_func("tvm_tma.encode_count")
driver_available = tvm_ffi.get_global_func("tvm_tma.driver_available")
driver_error = tvm_ffi.get_global_func("tvm_tma.driver_error")
cache_enable = tvm_ffi.get_global_func("tvm_tma.descriptor_cache_enable")
cache_stats = tvm_ffi.get_global_func("tvm_tma.descriptor_cache_stats")
cache_clear = tvm_ffi.get_global_func("tvm_tma.descriptor_cache_clear")

_driver_skip = pytest.mark.skipif(
    not driver_available(), reason=f"no usable CUDA driver: {driver_error()}"
)


def needs_driver(test):
    """A test that encodes through the real driver: part of the ``-m gpu`` run, and skipped
    where no driver loads."""
    return pytest.mark.gpu(_driver_skip(test))


@pytest.fixture(autouse=True)
def empty_descriptor_cache():
    """Each test starts from an empty, enabled cache: a freed buffer's address comes back in
    the next allocation, and a cached map would hide the encode a test counts."""
    cache_enable(True)
    cache_clear()
    yield
    cache_enable(True)
    cache_clear()


@dataclass(frozen=True)
class Tiled:
    """One tiled encode, arrays in driver order (innermost first)."""

    dtype: str = "float16"
    rank: int = 3
    address: int = 0x10000
    dims: tuple = (64, 8, 4)
    strides: tuple = (512, 128)
    box: tuple = (64, 8, 4)
    estrides: tuple = (1, 1, 1)
    interleave: int = 0
    swizzle: int = 3
    l2: int = 2
    oob: int = 0

    def args(self, address=None) -> list:
        """The flat packed layout shared by validate_tiled and encode_tiled (minus the map)."""
        return [
            self.dtype,
            self.rank,
            self.address if address is None else address,
            *self.dims,
            *self.strides,
            *self.box,
            *self.estrides,
            self.interleave,
            self.swizzle,
            self.l2,
            self.oob,
        ]


# The seed demo map: a (4, 8, 64) float16 tensor with a (4, 8, 64) box and 128B swizzle.
SEED = Tiled()


def rank_n(n: int, **kw) -> Tiled:
    """A shape of rank n that passes every rule except those the overrides break."""
    dims = (64,) + (2,) * (n - 1)
    strides = tuple(128 * 2**i for i in range(n - 1))
    return replace(SEED, rank=n, dims=dims, strides=strides, box=dims, estrides=(1,) * n, **kw)


def test_runtime_loads_once_and_finds_itself(monkeypatch):
    path = _runtime.load_runtime()
    assert _runtime.load_runtime() == path  # idempotent
    monkeypatch.setenv(_runtime.ENV_VAR, path)
    assert str(_runtime.find_runtime()) == path


def test_runtime_override_must_exist(monkeypatch, tmp_path):
    monkeypatch.setenv(_runtime.ENV_VAR, str(tmp_path / "missing.so"))
    with pytest.raises(ImportError, match="missing.so"):
        _runtime.find_runtime()


def test_seed_map_validates():
    assert validate_tiled(*SEED.args()) is None


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(rank_n(1, swizzle=0), id="rank1"),
        pytest.param(rank_n(5), id="rank5"),
        pytest.param(replace(SEED, swizzle=0, box=(8, 8, 4)), id="no-swizzle-16B-row"),
        pytest.param(replace(SEED, swizzle=1, box=(16, 8, 4)), id="swizzle32"),
        pytest.param(replace(SEED, swizzle=2, box=(32, 8, 4)), id="swizzle64"),
        pytest.param(replace(SEED, oob=1, l2=3, estrides=(1, 2, 8)), id="nan-fill-estrides"),
        pytest.param(replace(SEED, interleave=1, swizzle=0, box=(4, 8, 4)), id="interleave16"),
        pytest.param(
            replace(SEED, interleave=2, swizzle=1, address=0x10020, strides=(512, 128)),
            id="interleave32",
        ),
        pytest.param(replace(SEED, dims=(2**32, 8, 4), strides=(2**40 - 16, 128)), id="limits"),
        pytest.param(replace(SEED, strides=(0, 0)), id="broadcast-strides"),
        pytest.param(replace(SEED, address=ctypes.c_void_p(0x10000)), id="opaque-address"),
    ],
)
def test_valid_maps_pass(case):
    validate_tiled(*case.args())


@pytest.mark.parametrize(
    "dtype,box0",
    [
        ("uint8", 128),
        ("int8", 128),
        ("float8_e4m3fn", 128),
        ("float8_e5m2", 16),
        ("uint16", 64),
        ("int16", 64),
        ("bfloat16", 64),
        ("uint32", 32),
        ("int32", 32),
        ("float32", 32),
        ("uint64", 16),
        ("int64", 16),
        ("float64", 16),
    ],
)
def test_every_dtype_is_known(dtype, box0):
    validate_tiled(*replace(SEED, dtype=dtype, box=(box0, 8, 4)).args())


# (case, rule, text the message must contain: the offending value)
RULE_CASES = [
    (replace(SEED, rank=0, dims=(), strides=(), box=(), estrides=()), "rank", "rank 0"),
    (
        replace(SEED, rank=6, dims=(1,) * 6, strides=(16,) * 5, box=(16,) * 6, estrides=(1,) * 6),
        "rank",
        "rank 6",
    ),
    (rank_n(2, interleave=1, swizzle=0), "rank", "rank 2"),
    (replace(SEED, dtype="float7"), "dtype", "'float7'"),
    (replace(SEED, dtype="float4_e2m1fn"), "dtype", "'float4_e2m1fn'"),
    (replace(SEED, interleave=3), "enum", "interleave 3"),
    (replace(SEED, interleave=-1), "enum", "interleave -1"),
    (replace(SEED, swizzle=4), "enum", "swizzle 4"),
    (replace(SEED, l2=4), "enum", "l2_promotion 4"),
    (replace(SEED, oob=2), "enum", "oob_fill 2"),
    (replace(SEED, address=0x10003), "global-address-align", "0x10003"),
    (replace(SEED, address=0x10008), "global-address-align", "0x10008"),
    (replace(SEED, address=0), "global-address-align", "null"),
    (replace(SEED, interleave=2, swizzle=1, address=0x10010), "global-address-align", "0x10010"),
    (replace(SEED, dims=(64, 0, 4)), "global-dim", "dims[1] = 0"),
    (replace(SEED, dims=(64, 8, -4)), "global-dim", "dims[2] = -4"),
    (replace(SEED, dims=(2**32 + 1, 8, 4)), "global-dim", f"dims[0] = {2**32 + 1}"),
    (replace(SEED, strides=(520, 128)), "global-stride", "strides[0] = 520"),
    (replace(SEED, strides=(512, -128)), "global-stride", "strides[1] = -128"),
    (replace(SEED, strides=(512, 2**40)), "global-stride", f"strides[1] = {2**40}"),
    (
        replace(SEED, interleave=2, swizzle=1, address=0x10020, strides=(528, 128)),
        "global-stride",
        "strides[0] = 528",
    ),
    (replace(SEED, box=(64, 0, 4)), "box-dim", "box[1] = 0"),
    (replace(SEED, box=(64, 8, 257)), "box-dim", "box[2] = 257"),
    (replace(SEED, estrides=(0, 1, 1)), "element-stride", "element_strides[0] = 0"),
    (replace(SEED, estrides=(1, 9, 1)), "element-stride", "element_strides[1] = 9"),
    (replace(SEED, swizzle=0, box=(4, 8, 4)), "inner-box-16B", "4 * 2 = 8 bytes"),
    (replace(SEED, swizzle=0, dtype="float32", box=(3, 8, 4)), "inner-box-16B", "3 * 4 = 12"),
    (replace(SEED, box=(128, 8, 4)), "swizzle-span", "128 * 2 = 256 bytes"),
    (replace(SEED, swizzle=1, box=(32, 8, 4)), "swizzle-span", "32 * 2 = 64 bytes"),
    (replace(SEED, swizzle=2, box=(64, 8, 4)), "swizzle-span", "64 * 2 = 128 bytes"),
    (replace(SEED, interleave=2, swizzle=3, address=0x10020), "interleave-swizzle", "swizzle 3"),
    (replace(SEED, dtype="int32", box=(32, 8, 4), oob=1), "oob-fill-dtype", "'int32'"),
]


@pytest.mark.parametrize(
    "case,rule,value", [pytest.param(*c, id=f"{c[1]}:{c[2]}") for c in RULE_CASES]
)
def test_each_rule_names_itself_and_the_value(case, rule, value):
    with pytest.raises(ValueError) as info:
        validate_tiled(*case.args())
    message = str(info.value)
    assert f"tvm_tma: rule '{rule}'" in message
    assert value in message


def test_every_static_rule_is_covered():
    """Each rule of the C++ checker has at least one failing case above."""
    static_rules = {
        "rank",
        "dtype",
        "enum",
        "global-address-align",
        "global-dim",
        "global-stride",
        "box-dim",
        "element-stride",
        "inner-box-16B",
        "swizzle-span",
        "interleave-swizzle",
        "oob-fill-dtype",
    }
    assert static_rules == {rule for _, rule, _ in RULE_CASES}


def test_wrong_argument_count_is_a_type_error():
    with pytest.raises(TypeError, match="expected 18"):
        validate_tiled(*SEED.args()[:-1])
    with pytest.raises(TypeError, match="argument 1 \\(rank\\) must be an integer"):
        validate_tiled("float16", "3", 0x10000)


def test_wrong_argument_type_is_a_type_error():
    args = SEED.args()
    args[3] = "64"
    with pytest.raises(TypeError, match="argument 3 \\(dims\\) must be an integer"):
        validate_tiled(*args)


# encode_tiled: the rules run before the driver is touched, so these need no GPU.



def test_encode_rejects_misaligned_address_before_the_driver():
    before = encode_count()
    with pytest.raises(ValueError, match="rule 'global-address-align'") as info:
        encode_tiled(MAP, *SEED.args(address=ctypes.c_void_p(0x10003)))
    assert "0x10003" in str(info.value)
    assert encode_count() == before


def test_encode_rejects_null_map():
    with pytest.raises(ValueError, match="rule 'map-null'"):
        encode_tiled(None, *SEED.args())


def test_encode_checks_the_same_rules_as_validate():
    for case, rule, value in RULE_CASES:
        with pytest.raises(ValueError, match=f"rule '{rule}'") as info:
            encode_tiled(MAP, *case.args())
        assert value in str(info.value)


@pytest.mark.skipif(driver_available(), reason="needs a machine without a CUDA driver")
def test_encode_without_driver_says_so():
    with pytest.raises(RuntimeError, match="rule 'driver'"):
        encode_tiled(MAP, *SEED.args())
    assert encode_count() == 0


def test_errors_surface_through_generated_host_code():
    """A host PrimFunc calling the runtime by name (as the TMA lowering does) re-raises the
    runtime's error with its kind and message, and passes the map and address as handles."""
    tvm = pytest.importorskip("tvm")
    if not tvm.runtime.enabled("llvm"):
        pytest.skip("TVM built without LLVM")
    import numpy as np
    from tvm.script import tirx as T

    @T.prim_func
    def host(A: T.Buffer((4, 8, 64), "float16"), offset: T.int64):
        # fmt: off
        T.evaluate(
            T.call_packed(
                "tvm_tma.encode_tiled", T.tvm_stack_alloca("tensormap", 1), "float16", 3,
                T.address_of(A[0, 0, offset]), T.int64(64), T.int64(8), T.int64(4),
                T.int64(128), T.int64(1024), 64, 8, 4, 1, 1, 1, 0, 3, 2, 0,
            )
        )
        # fmt: on

    func = tvm.compile(tvm.IRModule({"main": host}), target="llvm")["main"]
    a = tvm.runtime.tensor(np.zeros((4, 8, 64), "float16"))
    with pytest.raises(ValueError, match="rule 'global-address-align'"):
        func(a, 1)
    if not driver_available():
        with pytest.raises(RuntimeError, match="rule 'driver'"):
            func(a, 0)
    else:  # a host buffer is not device memory
        with pytest.raises(ValueError, match="rule 'global-address'"):
            func(a, 0)


# With a driver (GPU machines): footprint checks and real encodes.



def _in_fresh_thread(fn):
    """Run fn on a new thread, which has no current CUDA context, and return what it raised."""
    raised = []

    def body():
        try:
            fn()
        except Exception as err:  # handed back to the test thread
            raised.append(err)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    return raised[0] if raised else None


@needs_driver
def test_encode_seed_map_on_device():
    buf = cuda_tensor(64 * 8 * 4 * 2)
    before = encode_count()
    encode_tiled(MAP, *SEED.args(address=ctypes.c_void_p(buf.data_ptr())))
    assert encode_count() == before + 1
    assert any(bytes(MAP_STORAGE)), "the encoded map was not copied out"


@needs_driver
def test_encode_rejects_footprint_outside_the_allocation():
    buf = cuda_tensor(64 * 8 * 4 * 2)
    too_big = replace(SEED, dims=(64, 8, 8))
    before = encode_count()
    with pytest.raises(ValueError, match="rule 'global-footprint'") as info:
        encode_tiled(MAP, *too_big.args(address=ctypes.c_void_p(buf.data_ptr())))
    assert hex(buf.data_ptr()) in str(info.value)
    assert encode_count() == before


@needs_driver
def test_encode_rejects_host_memory():
    cuda_tensor(16)  # make sure a CUDA context exists on this thread
    host = (ctypes.c_uint8 * 8192)()
    address = (ctypes.addressof(host) + 15) // 16 * 16
    with pytest.raises(ValueError, match="rule 'global-address'") as info:
        encode_tiled(MAP, *SEED.args(address=ctypes.c_void_p(address)))
    assert hex(address) in str(info.value)


@needs_driver
def test_footprint_is_checked_on_a_thread_without_context():
    """Generated host code may run on a thread where no CUDA context is current yet."""
    buf = cuda_tensor(64 * 8 * 4 * 2)
    too_big = replace(SEED, dims=(64, 8, 8))
    err = _in_fresh_thread(
        lambda: encode_tiled(MAP, *too_big.args(address=ctypes.c_void_p(buf.data_ptr())))
    )
    assert isinstance(err, ValueError) and "rule 'global-footprint'" in str(err)
    before = encode_count()
    assert (
        _in_fresh_thread(
            lambda: encode_tiled(MAP, *SEED.args(address=ctypes.c_void_p(buf.data_ptr())))
        )
        is None
    )
    assert encode_count() == before + 1
    host = (ctypes.c_uint8 * 8192)()
    address = (ctypes.addressof(host) + 15) // 16 * 16
    err = _in_fresh_thread(lambda: encode_tiled(MAP, *SEED.args(address=ctypes.c_void_p(address))))
    assert isinstance(err, ValueError) and "rule 'global-address'" in str(err)


# The descriptor cache: identical arguments replay the encoded map without the driver.


def test_failed_encodes_are_not_cached():
    misaligned = replace(SEED, address=0x10003)
    for _ in range(2):
        with pytest.raises(ValueError, match="rule 'global-address-align'"):
            encode_tiled(MAP, *misaligned.args())
    hits, misses, entries = cache_stats()
    assert (hits, misses, entries) == (0, 2, 0)


def _encoded(tiled: Tiled, address: int) -> bytes:
    encode_tiled(MAP, *tiled.args(address=ctypes.c_void_p(address)))
    return ctypes.string_at(MAP, 128)


@needs_driver
def test_repeated_encode_is_served_from_the_cache():
    buf = cuda_tensor(64 * 8 * 4 * 2 + 4096)
    before = encode_count()
    first = _encoded(SEED, buf.data_ptr())
    ctypes.memset(MAP, 0, 128)
    again = _encoded(SEED, buf.data_ptr())
    assert encode_count() == before + 1
    assert again == first and any(first)
    assert tuple(cache_stats()) == (1, 1, 1)


@needs_driver
@pytest.mark.parametrize("change", ["address", "dims", "strides", "box", "swizzle"])
def test_any_changed_argument_encodes_again(change):
    buf = cuda_tensor(64 * 8 * 4 * 2 * 4)
    base = buf.data_ptr()
    first = _encoded(SEED, base)
    changed, address = {
        "address": (SEED, base + 256),
        "dims": (replace(SEED, dims=(64, 8, 2)), base),
        "strides": (replace(SEED, strides=(256, 2048)), base),
        "box": (replace(SEED, box=(64, 8, 2)), base),
        "swizzle": (replace(SEED, swizzle=0), base),
    }[change]
    before = encode_count()
    second = _encoded(changed, address)
    assert encode_count() == before + 1
    assert second != first
    assert tuple(cache_stats()) == (0, 2, 2)


@needs_driver
def test_disabled_cache_encodes_every_time():
    buf = cuda_tensor(64 * 8 * 4 * 2)
    cache_enable(False)
    before = encode_count()
    for _ in range(3):
        _encoded(SEED, buf.data_ptr())
    assert encode_count() == before + 3
    assert tuple(cache_stats())[2] == 0


@needs_driver
def test_a_cache_hit_still_checks_the_allocation():
    """A cached map of freed memory must not be replayed: the footprint check runs on hits."""
    buf = cuda_tensor(64 * 8 * 4 * 2)
    address = buf.data_ptr()
    _encoded(SEED, address)
    del buf  # TVM frees device memory with cudaFree: the address leaves every allocation
    with pytest.raises(ValueError, match="rule 'global-address'") as info:
        _encoded(SEED, address)
    assert hex(address) in str(info.value)
    assert tuple(cache_stats())[:2] == (1, 1)


max_active_clusters = tvm_ffi.get_global_func("tvm_tma.max_active_clusters")


@pytest.mark.parametrize("shape, value", [((0, 0, 384, 1024), "cluster_size=0"),
                                          ((0, 17, 384, 1024), "cluster_size=17"),
                                          ((0, 4, 0, 1024), "threads=0"),
                                          ((0, 4, 384, -1), "shared_bytes=-1")], ids=str)
def test_max_active_clusters_refuses_a_launch_shape_no_gpu_runs(shape, value):
    """The residency query checks its launch shape before it touches the driver."""
    with pytest.raises(ValueError, match="rule 'cluster-size'") as info:
        max_active_clusters(*shape)
    assert value in str(info.value)


@needs_driver
def test_max_active_clusters_counts_whole_clusters_a_gpu_holds():
    """The driver's answer for a TMA kernel's launch (384 threads, 227 KiB of shared memory:
    one CTA an SM): every SM in clusters of 1 and 2 (an SM pair is a TPC), whole clusters of
    4 that leave SMs of some GPCs idle, and the measured count where it was measured
    (kernels/residency.py), which the default 2x2 grid takes."""
    tvm = pytest.importorskip("tvm")
    from tvm_tma.kernels.residency import RESIDENT_IN_CLUSTERS_OF_4, resident_on_device

    sms = tvm.cuda(0).multi_processor_count
    shared = 227 * 1024
    assert max_active_clusters(0, 1, 384, shared) == sms
    assert max_active_clusters(0, 2, 384, shared) == sms // 2
    fours = resident_on_device(0, 4, 384, shared)
    assert fours % 4 == 0 and 0 < fours <= sms
    if sms in RESIDENT_IN_CLUSTERS_OF_4:
        assert fours == RESIDENT_IN_CLUSTERS_OF_4[sms]
    # Half the shared memory: two CTAs an SM.
    assert max_active_clusters(0, 1, 384, 100 * 1024) == 2 * sms
