"""The dynamic shared arena is 1024-byte aligned only in kernels without static shared memory.

The planner proves every TMA copy into a ``shared.dyn`` buffer 128-byte aligned (and a
swizzled tile on its 256/512/1024-byte period) from the arena's start, taking that start to
be 1024-byte aligned. It is, when the kernel declares no static ``__shared__`` memory: the
arena then begins the CTA's shared window. Static shared buffers (``T.alloc_buffer(...,
scope="shared")``, a common place for an mbarrier) are laid out first, and the arena follows
them on a 64-byte boundary whatever alignment its declaration asks for (measured on an H200:
8 + 12 bytes of static shared put the arena at byte 1088). A copy planned as aligned would
then fault, or land permuted by the swizzle.

Where the arena starts is decided by the CUDA compiler, after the dispatch ran; the first
place that sees the whole kernel is the generated CUDA source. So this module installs TVM's
``tvm_callback_cuda_postproc`` hook (chaining to one already registered) and refuses, with
the rule ``shared-allocation``, a kernel that issues TMA copies into its dynamic arena while
declaring static shared memory.
"""

from __future__ import annotations

import re

from ..planner.errors import refuse

_HOOK = "tvm_callback_cuda_postproc"
_KERNEL = re.compile(r'extern "C" __global__ void[^{;]*?\b(\w+)\([^)]*\)\s*\{')
_DYNAMIC = re.compile(r"extern __shared__[^;]*?\b(\w+)\[\];")
_STATIC = re.compile(r"^\s*__shared__[^;]*?\b(\w+)\[[^\]]*\];", re.MULTILINE)
_TMA_CALL = re.compile(r"\btvm_tma_(?:load|store|reduce)_\w+\(([^;]*)\);")

_installed = False


def _kernel_bodies(code: str):
    """(name, body text) of every kernel definition in a CUDA source."""
    starts = [(match.group(1), match.end()) for match in _KERNEL.finditer(code)]
    for index, (name, start) in enumerate(starts):
        end = starts[index + 1][1] if index + 1 < len(starts) else len(code)
        yield name, code[start:end]


def check_arena_alignment(code: str) -> None:
    """Refuse a kernel that copies with TMA into its dynamic arena and declares static
    shared memory (see the module docstring)."""
    for name, body in _kernel_bodies(code):
        dynamic = _DYNAMIC.search(body)
        static = _STATIC.findall(body)
        if dynamic is None or not static:
            continue
        arena = dynamic.group(1)
        if any(re.search(rf"\b{arena}\b", call.group(1)) for call in _TMA_CALL.finditer(body)):
            raise refuse(
                "shared-allocation",
                f"kernel {name} copies with TMA into its dynamic shared arena ({arena}) and "
                f"declares static shared memory ({', '.join(static)}): CUDA lays the arena out "
                "after the static buffers, off the 1024-byte alignment the copies were planned "
                "for; declare those buffers inside the shared.dyn allocation instead "
                "(T.decl_buffer(..., dyn.data, elem_offset=...))")


def install() -> None:
    """Register the check as TVM's CUDA post-processing hook (once; chains an existing one)."""
    global _installed
    if _installed:
        return
    import tvm_ffi

    previous = tvm_ffi.get_global_func(_HOOK, allow_missing=True)

    def postproc(code, *rest):
        if previous is not None:
            code = previous(code, *rest)
        check_arena_alignment(str(code))
        return code

    tvm_ffi.register_global_func(_HOOK, postproc, override=True)
    _installed = True
