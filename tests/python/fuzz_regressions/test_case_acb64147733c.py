"""Fuzzer regression acb64147733c: timeout.

Minimized from random_case(20251122, 1286). Failure when found:
no answer within 20.0 s
"""

from tvm_tma.testing.copy_cases import CopyCase
from tvm_tma.testing.fuzz import check_case

CASE = CopyCase(
    name='fuzz-20251122-1286',
    dtype='uint8',
    direction='g2s',
    global_shape=(513, 2),
    global_start=(1, 0),
    global_extent=(512, 2),
    shared_shape=(512, 2),
)


def test_fuzz_regression_acb64147733c():
    outcome = check_case(CASE)
    assert outcome.status != "mismatch", f"{outcome.kind}: {outcome.problem}"
