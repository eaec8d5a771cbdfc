"""Target helpers: which SM generation an ``arch`` string names, and arch gating."""

from __future__ import annotations

import re

from .errors import IntrinError


def sm_version(arch: str) -> int:
    """``"sm_90a"`` -> 90; unknown strings -> 0."""
    match = re.search(r"sm_(\d+)", arch or "")
    return int(match.group(1)) if match else 0


def has_arch_suffix(arch: str) -> bool:
    """``sm_90a`` / ``sm_100a`` / ``sm_100f`` carry the architecture-specific feature set."""
    return bool(re.search(r"sm_\d+[af]$", arch or ""))


def current_arch() -> str | None:
    import tvm

    target = tvm.target.Target.current(allow_none=True)
    return str(target.attrs.get("arch", "")) if target is not None else None


def check_arch(floor: tuple[int, str], arch: str | None, what: str) -> None:
    """Refuse ``what`` on a target below ``floor`` (unknown targets are checked at codegen)."""
    arch = arch if arch is not None else current_arch()
    if not arch:
        return
    version, suffix = floor
    ok = sm_version(arch) >= version and (not suffix or has_arch_suffix(arch))
    if not ok:
        needed = f"sm_{version}{suffix}"
        raise IntrinError("arch", f"{what} needs {needed} or newer, target is {arch}")
