"""Target helpers: which SM generation an ``arch`` string names, and arch gating."""

from __future__ import annotations

import re

from .errors import IntrinError


def sm_version(arch: str) -> int:
    """``"sm_90a"`` -> 90; unknown strings -> 0."""
    match = re.search(r"sm_(\d+)", arch) if isinstance(arch, str) else None
    return int(match.group(1)) if match else 0


def has_arch_suffix(arch: str) -> bool:
    """``sm_90a`` / ``sm_100a`` / ``sm_100f`` carry the architecture-specific feature set."""
    return isinstance(arch, str) and bool(re.search(r"sm_\d+[af]$", arch))


def current_arch() -> str | None:
    import tvm

    target = tvm.target.Target.current(allow_none=True)
    return str(target.attrs.get("arch", "")) if target is not None else None


def writes_cta_group(arch: str) -> bool:
    """Blackwell sm_10x with the arch-specific feature set spells ``.cta_group::1``."""
    return 100 <= sm_version(arch) < 120 and has_arch_suffix(arch)


def describe_floor(floor: tuple) -> str:
    version, suffix, *below = floor
    text = f"sm_{version}{suffix} or newer"
    return text + f" (below sm_{below[0]})" if below else text


def check_arch(floor: tuple, arch: str | None, what: str) -> None:
    """Refuse ``what`` on a target outside ``floor`` = (version, suffix[, below]).

    Unknown targets are checked again when the kernel is compiled (see asm.arch_guard).
    """
    if arch is not None and not isinstance(arch, str):
        raise IntrinError("arch", f"arch must be a target arch string such as \"sm_90a\", "
                          f"got {arch!r} ({type(arch).__name__})")
    arch = arch if arch is not None else current_arch()
    if not arch:
        return
    version, suffix, *below = floor
    ok = sm_version(arch) >= version and (not suffix or has_arch_suffix(arch))
    ok = ok and (not below or sm_version(arch) < below[0])
    if not ok:
        raise IntrinError("arch", f"{what} needs {describe_floor(floor)}, target is {arch}")
