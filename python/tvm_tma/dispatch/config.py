"""The keyword options of ``Tx.copy_async(..., dispatch="tma", **options)``."""

from __future__ import annotations

from dataclasses import dataclass

from ..planner.errors import refuse

#: Options the variant understands; anything else is refused by name, never ignored.
SUPPORTED_OPTIONS = ("mbar",)


@dataclass(frozen=True)
class CopyOptions:
    mbar: object | None  # the mbarrier address a g2s copy completes on


def read_options(config, direction: str) -> CopyOptions:
    """Validate the options for a copy in ``direction`` ("g2s" / "s2g")."""
    unknown = sorted(str(key) for key in config if str(key) not in SUPPORTED_OPTIONS)
    if unknown:
        raise refuse(
            "config",
            f"unsupported option(s) {unknown} for dispatch='tma' (supported: "
            f"{list(SUPPORTED_OPTIONS)})",
        )
    mbar = config.get("mbar")
    if direction == "g2s" and mbar is None:
        raise refuse(
            "config",
            "a global->shared TMA copy needs mbar=<mbarrier address>: the hardware signals "
            "completion on it",
        )
    if direction == "s2g" and mbar is not None:
        raise refuse(
            "config",
            "mbar is only for global->shared copies; a shared->global copy completes through "
            "cp.async.bulk.commit_group / wait_group",
        )
    return CopyOptions(mbar=mbar)
