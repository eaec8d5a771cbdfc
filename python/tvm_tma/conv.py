"""A 2-D convolution's shapes, and its GEMM view over an NHWC activation.

An implicit-GEMM convolution (fprop) computes ``Y[(n, p, q), k] = sum over (r, s, c) of
A[(n, p, q), (r, s, c)] * F[k, (r, s, c)]`` with ``A`` the im2col matrix of the activation
``X`` (N, H, W, C), ``F`` the filter (K, R, S, C) seen as (K, R*S*C) and ``Y`` the output
(N, P, Q, K) seen as (N*P*Q, K). :class:`Conv2dGeometry` holds the shapes and builds the
GEMM view of X that a kernel declares and copies tiles from with ``dispatch="tma"``::

    geometry = Conv2dGeometry(n=32, h=56, w=56, c=64, k=64, r=3, s=3, padding=(1, 1))
    X = T.match_buffer(X_ptr, geometry.argument_shape, dtype,
                       layout=geometry.argument_layout)
    A = T.decl_buffer(geometry.view_shape, dtype, X.data,
                      elem_offset=geometry.view_elem_offset, layout=geometry.view_layout)
    Tx.copy_async(a_tile[:, :], A[m0:m0 + 128, k0:k0 + 64], dispatch="tma", mbar=...)

The view's layout is exact (element ``(m, k)`` of A is that element of X); the padding halo
lies outside X and reads as zeros. The planner recognizes the view and plans TMA im2col
loads (``tvm_tma.planner.im2col``), or, for a pointwise layer (:attr:`is_pointwise`: the
view is X itself as an (N*H*W, C) matrix), tiled loads of that matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm.tirx.layout import S, TileLayout


@dataclass(frozen=True)
class Conv2dGeometry:
    """NHWC activation (n, h, w, c), KRSC filter (k, r, s, c), NPQK output."""

    n: int
    h: int
    w: int
    c: int
    k: int
    r: int
    s: int
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)

    def __post_init__(self) -> None:
        for name in ("n", "h", "w", "c", "k", "r", "s"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: every extent is at least 1")
        if min(self.stride) < 1 or min(self.dilation) < 1 or min(self.padding) < 0:
            raise ValueError(f"stride {self.stride} and dilation {self.dilation} must be >= 1, "
                             f"padding {self.padding} >= 0")
        if self.p < 1 or self.q < 1:
            raise ValueError(f"a {self.r}x{self.s} filter does not fit {self.h}x{self.w} with "
                             f"padding {self.padding} and dilation {self.dilation}")

    @property
    def is_pointwise(self) -> bool:
        """A 1x1 filter at stride 1 without padding: the GEMM view is X itself as an
        (N*H*W, C) matrix (the planner loads it in tiled mode, not im2col)."""
        return (self.r, self.s, self.stride, self.padding) == (1, 1, (1, 1), (0, 0))

    def patches_folded(self) -> Conv2dGeometry:
        """The same convolution over the same memory, with each patch axis folded: the
        geometry the im2col loads read (the planner folds the view alike,
        ``tvm_tma.planner.im2col.fold_patches``).

        An axis whose filter extent is its stride (W: ``s == v > 1``, or the one patch of
        an image as wide as the filter), undilated and unpadded, over an image of a whole
        number of patches (``W == Q * s``), reads each
        input pixel once, in non-overlapping runs of ``s`` pixels: pixel run ``q`` of a
        row, ``s * C`` contiguous elements of NHWC, is one pixel of ``s * C`` channels of
        a ``W / s``-wide image, and the filter one tap wide (KRSC's ``(s, c)`` is that
        pixel's channel ``s * C + c``: the filter's memory does not move). Along H
        (``r == u > 1``, ``H == P * r``) image n's patch row p is image ``n * P + p`` of
        ``r`` rows, read by an ``r``-row filter at its one output row. The GEMM
        (``M = N*P*Q``, ``K = R*S*C``, every element of A, B and Y) is unchanged.

        Why: an im2col load walks pixels at the traversal stride, at most 8 (a ViT's 16 x
        16 patches at stride 16 have no im2col map unfolded), and reads one tap's channels
        (a 4 x 4 stride-4 stem over 8 channels: 16-byte loads unfolded, 64-byte folded).
        A folded C may also be no multiple of 8 before folding: RGB in 16-wide patches
        is 48 channels a folded pixel."""
        (u, v), (dh, dw), (ph, pw) = self.stride, self.dilation, self.padding
        n, h, w, c, r, s = self.n, self.h, self.w, self.c, self.r, self.s
        if s > 1 and (v == s or self.q == 1) and dw == 1 and pw == 0 and w == self.q * s:
            w, c, s, v = w // s, s * c, 1, 1
        if r > 1 and (u == r or self.p == 1) and dh == 1 and ph == 0 and h == self.p * r:
            n, h, u = n * self.p, r, 1
        if (n, h, w, c, r, s) == (self.n, self.h, self.w, self.c, self.r, self.s):
            return self
        return Conv2dGeometry(n, h, w, c, self.k, r, s, (u, v), self.padding, self.dilation)

    @property
    def p(self) -> int:
        """Output rows."""
        return (self.h + 2 * self.padding[0] - self.dilation[0] * (self.r - 1) - 1
                ) // self.stride[0] + 1

    @property
    def q(self) -> int:
        """Output columns."""
        return (self.w + 2 * self.padding[1] - self.dilation[1] * (self.s - 1) - 1
                ) // self.stride[1] + 1

    @property
    def gemm_m(self) -> int:
        return self.n * self.p * self.q

    @property
    def gemm_n(self) -> int:
        return self.k

    @property
    def gemm_k(self) -> int:
        return self.r * self.s * self.c

    @property
    def flops(self) -> int:
        return 2 * self.gemm_m * self.gemm_n * self.gemm_k

    # The activation as the kernel argument, and the GEMM view over its data.
    @property
    def argument_shape(self) -> tuple[int, int, int, int]:
        return (self.n, self.h, self.w, self.c)

    @property
    def argument_layout(self) -> TileLayout:
        return TileLayout(S[self.argument_shape])

    @property
    def view_shape(self) -> tuple[int, int]:
        return (self.gemm_m, self.gemm_k)

    @property
    def view_elem_offset(self) -> int:
        """Where element (0, 0) of the view would be: the first tap of the first output pixel
        sits ``padding`` rows and columns before X's first pixel."""
        return -(self.padding[0] * self.w * self.c + self.padding[1] * self.c)

    @property
    def view_layout(self) -> TileLayout:
        """Rows walk (n, p, q), columns (r, s, c), each with its stride in X."""
        (u, v), (dh, dw) = self.stride, self.dilation
        row, pixel = self.w * self.c, self.c
        return TileLayout(S[(self.n, self.p, self.q, self.r, self.s, self.c) :
                            (self.h * row, u * row, v * pixel, dh * row, dw * pixel, 1)])

    @property
    def tap_channels(self) -> int:
        """One filter tap's channels as the im2col loads read them: C, or ``S * C`` where
        the W patch axis folds (:meth:`patches_folded`)."""
        return self.patches_folded().c

    @property
    def taps_view_shape(self) -> tuple[int, int, int]:
        """The view as (output pixels, filter taps, channels): the same matrix and layout
        as :attr:`view_shape`, each tap's channels a dimension of their own, so a load may
        run past them (reading zeros): a K block wider than the tap's channels."""
        return (self.gemm_m, self.gemm_k // self.tap_channels, self.tap_channels)

    @property
    def filter_shape(self) -> tuple[int, int]:
        """The KRSC filter as the GEMM's B operand (N x K, K-major)."""
        return (self.k, self.gemm_k)

    @property
    def output_shape(self) -> tuple[int, int]:
        """The NPQK output as the GEMM's C (M x N)."""
        return (self.gemm_m, self.k)

    def describe(self) -> str:
        return (f"N={self.n} {self.h}x{self.w}x{self.c} -> K={self.k}, {self.r}x{self.s}, "
                f"stride {self.stride[0]}, pad {self.padding[0]}")
