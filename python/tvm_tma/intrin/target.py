"""Target helpers: which SM generation an ``arch`` string names."""

from __future__ import annotations

import re


def sm_version(arch: str) -> int:
    """``"sm_90a"`` -> 90; unknown strings -> 0."""
    match = re.search(r"sm_(\d+)", arch or "")
    return int(match.group(1)) if match else 0
