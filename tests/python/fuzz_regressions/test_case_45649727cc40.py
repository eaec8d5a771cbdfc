"""Fuzzer regression 45649727cc40: timeout.

Minimized from random_case(20251122, 1336). Failure when found:
no answer within 20.0 s
"""

from tvm_tma.testing.copy_cases import CopyCase
from tvm_tma.testing.fuzz import check_case

CASE = CopyCase(
    name='fuzz-20251122-1336',
    dtype='float32',
    direction='g2s',
    global_shape=(281, 2),
    global_start=(0, 0),
    global_extent=(281, 2),
    shared_shape=(281, 2),
)


def test_fuzz_regression_45649727cc40():
    outcome = check_case(CASE)
    assert outcome.status != "mismatch", f"{outcome.kind}: {outcome.problem}"
