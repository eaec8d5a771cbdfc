"""Fuzzer regression 6b4d3c95002d: invariant:bytes.

Minimized from random_case(20251122, 501). Failure when found:
256 B x 4 issues != 256 B
"""

from tvm_tma.testing.copy_cases import CopyCase
from tvm_tma.testing.fuzz import check_case

CASE = CopyCase(
    name='fuzz-20251122-501',
    dtype='uint8',
    direction='g2s',
    global_shape=(9, 64),
    global_start=(5, 0),
    global_extent=(4, 64),
    shared_shape=(4, 64),
    shared_layout='blocked:2:128',
)


def test_fuzz_regression_6b4d3c95002d():
    outcome = check_case(CASE)
    assert outcome.status != "mismatch", f"{outcome.kind}: {outcome.problem}"
