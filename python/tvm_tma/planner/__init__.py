"""Three-level TMA planner (pure Python; needs TVM's layout classes, no lowering, no GPU).

L1 (:mod:`.views`, :mod:`.refine`) reads both layouts and factors them into common copy axes;
L2 (:mod:`.descriptor`) finds the dense shared-memory chain and cuts it into box segments;
L3 (:mod:`.descriptor`, :mod:`.rules`) stacks segments into a tensor map, folds, promotes,
validates every hardware rule and retries with a shorter chain when the rank is exceeded.
"""

from .api import copy_direction, plan
from .errors import RULES, PlanError
from .plan_types import Issue, IssueAxis, TensorMapSpec, TmaPlan

__all__ = [
    "RULES",
    "Issue",
    "IssueAxis",
    "PlanError",
    "TensorMapSpec",
    "TmaPlan",
    "copy_direction",
    "plan",
]
