"""Fuzzer regression 210b481ba037: invariant:bytes.

Minimized from random_case(20251122, 5083). Failure when found:
196608 B x 4 issues != 12288 B
"""

from tvm_tma.testing.copy_cases import CopyCase
from tvm_tma.testing.fuzz import check_case

CASE = CopyCase(
    name='fuzz-20251122-5083',
    dtype='float16',
    direction='g2s',
    global_shape=(65, 96),
    global_start=(1, 0),
    global_extent=(64, 96),
    shared_shape=(2, 32, 96),
    shared_layout='swizzle:0',
)


def test_fuzz_regression_210b481ba037():
    outcome = check_case(CASE)
    assert outcome.status != "mismatch", f"{outcome.kind}: {outcome.problem}"
