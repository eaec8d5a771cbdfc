"""What ``explain`` returns: one record per TMA copy, planned or refused, and why."""

from __future__ import annotations

from dataclasses import dataclass

from ..planner.plan_types import TmaPlan
from ..planner.proofs import Established

#: swizzle enum -> its name in cuda.h
SWIZZLE_NAMES = {0: "NONE", 1: "32B", 2: "64B", 3: "128B"}
L2_PROMOTION_NAMES = {0: "NONE", 1: "64B", 2: "128B", 3: "256B"}
OOB_FILL_NAMES = {0: "NONE", 1: "NAN_REQUEST_ZERO_FMA"}
INTERLEAVE_NAMES = {0: "NONE", 1: "16B", 2: "32B"}


def _listed(values) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


@dataclass(frozen=True)
class CopyExplanation:
    """One ``copy_async(..., dispatch="tma")``: its plan, or the rule that refused it."""

    line: int | None
    source: str
    direction: str | None
    plan: TmaPlan | None = None
    established: tuple[Established, ...] = ()
    instruction: str | None = None
    rule: str | None = None
    detail: str | None = None
    hint: str | None = None
    #: For a refusal: the safety fact the planner failed to prove last, with what it knew.
    unproven: tuple[Established, ...] = ()

    @property
    def planned(self) -> bool:
        return self.plan is not None

    @property
    def encoder(self) -> str:
        """The driver entry point that encodes the copy's map."""
        im2col = self.plan is not None and self.plan.is_im2col
        return "cuTensorMapEncodeIm2col" if im2col else "cuTensorMapEncodeTiled"

    def map_fields(self) -> tuple[tuple[str, str], ...]:
        """The encoder's arguments in the driver's order (innermost dimension first)."""
        if self.plan is None:
            return ()
        spec = self.plan.tensor_map
        if self.plan.is_im2col:
            shape = (("pixelBoxLowerCorner", _listed(spec.lower_corner)),
                     ("pixelBoxUpperCorner", _listed(spec.upper_corner)),
                     ("channelsPerPixel", str(spec.channels_per_pixel)),
                     ("pixelsPerColumn", str(spec.pixels_per_column)))
        else:
            shape = (("boxDim", _listed(spec.box_dims)),)
        return (
            ("tensorDataType", spec.dtype),
            ("tensorRank", str(spec.rank)),
            ("globalDim", _listed(spec.global_dims)),
            ("globalStrides", _listed(spec.global_strides)),
            *shape,
            ("elementStrides", _listed(spec.element_strides)),
            ("interleave", INTERLEAVE_NAMES.get(spec.interleave, str(spec.interleave))),
            ("swizzle", SWIZZLE_NAMES.get(spec.swizzle, str(spec.swizzle))),
            ("l2Promotion", L2_PROMOTION_NAMES.get(spec.l2_promotion, str(spec.l2_promotion))),
            ("oobFill", OOB_FILL_NAMES.get(spec.oob_fill, str(spec.oob_fill))),
        )


@dataclass(frozen=True)
class KernelExplanation:
    """Every TMA copy of one PrimFunc, in program order."""

    name: str
    arch: str
    copies: tuple[CopyExplanation, ...]
