"""``explain``: the plan (or the refusal, with its rule and a way out) of every TMA copy."""

from .cli import ExplainError, find_functions, load_module
from .explain import explain, explain_copy
from .model import CopyExplanation, KernelExplanation
from .report import format_kernel

__all__ = ["CopyExplanation", "ExplainError", "KernelExplanation", "explain",
           "explain_copy", "find_functions", "format_kernel", "load_module"]
