"""The ``copy_async`` dispatch variant "tma" (target cuda, priority 10)."""

from . import arena_check, loop_facts, script_hook, variant
from .variant import PRIORITY, VARIANT, lower_tma_copy


def register() -> None:
    variant.register()
    script_hook.install()
    arena_check.install()
    loop_facts.install()


__all__ = ["PRIORITY", "VARIANT", "lower_tma_copy", "register"]
