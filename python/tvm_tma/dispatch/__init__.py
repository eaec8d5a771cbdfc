"""The ``copy_async`` dispatch variant "tma" (target cuda, priority 10)."""

from . import script_hook, variant
from .variant import PRIORITY, VARIANT, lower_tma_copy


def register() -> None:
    variant.register()
    script_hook.install()


__all__ = ["PRIORITY", "VARIANT", "lower_tma_copy", "register"]
