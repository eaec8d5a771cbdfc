"""``T.assume(...)`` in kernels built by TVM 0.27's TIRx pipeline.

``T.assume(cond)`` states a fact the compiler may rely on; TVM's classic pipeline removes it
before code generation, but 0.27's "tirx" pipeline does not, so the CUDA code generator
stops with "Unresolved call tirx.assume". The "tma" dispatch reads ``T.assume`` facts to
prove copies in bounds (:mod:`tvm_tma.dispatch.facts`), so kernels must be able to state
them: this registers CUDA code for the op that does what removal would do, nothing at run
time. A codegen already registered for the op (a later TVM) is left in place.
"""

from __future__ import annotations

_HELPER = "tvm_tma_assume"
_SOURCE = (f"template <typename C> __forceinline__ __device__ void {_HELPER}(C) {{}}\n")


def register() -> None:
    from tvm.backend.cuda.codegen.registry import CODEGEN_REGISTRY, register_codegen
    from tvm.backend.cuda.op import cuda_func_call

    if "tirx.assume" in CODEGEN_REGISTRY:
        return

    @register_codegen("assume")
    def _assume(condition):  # noqa: ARG001  (assumed, so not evaluated)
        return cuda_func_call(_HELPER, 0, source_code=_SOURCE)
