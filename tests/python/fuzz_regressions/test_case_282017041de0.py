"""Fuzzer regression 282017041de0: invariant:bytes.

Minimized from random_case(20251122, 476). Failure when found:
256 B x 4 issues != 128 B
"""

from tvm_tma.testing.copy_cases import CopyCase
from tvm_tma.testing.fuzz import check_case

CASE = CopyCase(
    name='fuzz-20251122-476',
    dtype='float16',
    direction='g2s',
    global_shape=(9, 8),
    global_start=(1, 0),
    global_extent=(8, 8),
    shared_shape=(8, 8),
    shared_layout='blocked:4:160',
)


def test_fuzz_regression_282017041de0():
    outcome = check_case(CASE)
    assert outcome.status != "mismatch", f"{outcome.kind}: {outcome.problem}"
