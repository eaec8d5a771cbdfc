"""How a GEMM kernel declares its A operand when A is not a plain row-major M x K tensor.

The conv2d kernel is this GEMM with A the im2col GEMM view of an NHWC activation: the
kernel argument is the (N, H, W, C) tensor, and the (M, K) matrix the A copies read is a
buffer declared over the argument's data with a layout of its own. Keeping that difference
in one small object (instead of a second kernel) means the producer, the ring, the
mainloop and the epilogue stay the GEMM's: every A copy still reads
``A[rows, k0:k0 + block_k]``, and the dispatch plans it against whatever layout ``A`` has.

:func:`tvm_tma.kernels.gemm.gemm_kernel` (``a_operand=``) declares, in the PrimFunc::

    X = T.match_buffer(A_ptr, a.argument_shape, dtype, layout=a.argument_layout)
    A = T.decl_buffer((m, k), dtype, X.data, elem_offset=a.view_elem_offset,
                      layout=a.view_layout)

Any object with these four attributes works (the kernel reads nothing else but an optional
``view_shape``, (M, K) where absent or None);
:class:`AOperand` is the plain dataclass for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm.ir import Expr
from tvm.tirx.layout import S, TileLayout


@dataclass(frozen=True)
class AOperand:
    """A kernel argument and the (M, K) view of it that the A copies read."""

    #: Shape of the kernel argument (e.g. (N, H, W, C) for a conv2d activation).
    argument_shape: tuple[int, ...]
    #: Layout of the kernel argument (``T.match_buffer(..., layout=)``).
    argument_layout: TileLayout
    #: Layout of the (M, K) view over the argument's data (``T.decl_buffer(..., layout=)``).
    view_layout: TileLayout
    #: Elements from the argument's data pointer to the view's first element.
    view_elem_offset: int | Expr = 0
    #: The view's shape: None for (M, K); (M, taps, channels) for a kernel whose K walks
    #: filter taps (``GemmConfig.tap_columns``: K blocks may run past a tap's channels).
    view_shape: tuple[int, ...] | None = None

    @classmethod
    def row_major(cls, m: int, k: int) -> AOperand:
        """The trivial operand: an (M, K) row-major argument viewed as itself. A kernel
        built with it reads A exactly as the default (``a_operand=None``) one does."""
        layout = TileLayout(S[m, k])
        return cls((m, k), layout, layout, 0)
