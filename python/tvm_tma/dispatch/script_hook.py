"""Parse-time acceptance of ``dispatch="tma"`` copies in TVMScript.

TVM 0.27's builder checks ``copy_async`` operands with ``_check_copy_regions_match``, which
relaxes "same region shape" to "same payload bytes" only for its own TMA variant names. A
TMA copy is byte-oriented, so "tma" must be judged the same way. The builder looks the check
up as a module global on every call, so wrapping that global is the one extension point that
leaves every other dispatch untouched.

The same hook writes what only the parser can see into the copy's config: the facts that
hold at the copy (:mod:`.facts`), so that the planner can prove bounds of CTA-dependent
coordinates, and the kernel argument a global view aliases (:mod:`.roots`).
"""

from __future__ import annotations

import tvm.tirx.script.builder.tirx as _builder

from .facts import capture_into
from .roots import capture_roots

#: The upstream variant whose parse-time rule "tma" shares (equal payload bytes).
_BYTE_CHECKED_VARIANT = "tma_auto"


def install() -> None:
    original = _builder._check_copy_regions_match
    if getattr(original, "_tvm_tma_wrapped", False):
        return

    def check_copy_regions_match(dst, src, config, name, dispatch=None):
        if dispatch == "tma":
            capture_into(config)
            capture_roots(config, dst, src)
            dispatch = _BYTE_CHECKED_VARIANT
        return original(dst, src, config, name, dispatch)

    check_copy_regions_match._tvm_tma_wrapped = True  # type: ignore[attr-defined]
    _builder._check_copy_regions_match = check_copy_regions_match
