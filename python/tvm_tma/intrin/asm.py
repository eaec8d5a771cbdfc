"""Render one PTX instruction as a ``__forceinline__`` CUDA helper with inline asm.

Operand classes follow the ISA and seed 000: descriptors and cache policies are 64-bit
``l``, coordinates and sizes 32-bit ``r``, multicast masks and im2col offsets 16-bit ``h``;
shared-memory addresses are converted from generic pointers to 32-bit ``r`` operands.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

#: operand kind -> (asm constraint, C expression converting the parameter). Helpers are
#: templates, so one helper accepts a descriptor as ``&map`` (an integer in TVM's CUDA) or
#: as a typed pointer into a global buffer.
OPERAND_KINDS: dict[str, tuple[str, str]] = {
    "smem": ("r", "(unsigned)__cvta_generic_to_shared((const void*)({}))"),
    "gaddr": ("l", "(unsigned long long)({})"),
    "u64": ("l", "(unsigned long long)({})"),
    "s32": ("r", "(int)({})"),
    "u32": ("r", "(unsigned)({})"),
    "u16": ("h", "(unsigned short)({})"),
}


@dataclass(frozen=True)
class Instruction:
    """One asm statement: its template (``%i`` placeholders) and its operand kinds."""

    template: str
    kinds: tuple[str, ...]


def helper_source(name: str, instructions: list[Instruction], kinds: tuple[str, ...],
                  routes: list[tuple[int, ...]]) -> str:
    """A device helper taking ``kinds`` parameters that runs ``instructions`` in order.

    ``routes[i]`` lists which helper parameters feed instruction ``i``'s operands.
    """
    params = ", ".join(f"P{i} a{i}" for i in range(len(kinds)))
    template = "template <" + ", ".join(f"typename P{i}" for i in range(len(kinds))) + ">\n"
    lines = [f"{template if kinds else ''}__forceinline__ __device__ void {name}({params}) {{"]
    for instruction, route in zip(instructions, routes):
        operands = ", ".join(
            f'"{OPERAND_KINDS[kinds[p]][0]}"({OPERAND_KINDS[kinds[p]][1].format(f"a{p}")})'
            for p in route
        )
        lines.append(f'  asm volatile("{instruction.template}" :: {operands} : "memory");')
    lines.append("}\n")
    return "\n".join(lines)


def helper_name(family: str, spec: str) -> str:
    """A stable, unique helper name per (family, spec)."""
    digest = hashlib.sha1(spec.encode()).hexdigest()[:10]
    return f"tvm_tma_{family}_{digest}"


def arch_guard(floor: tuple, what: str) -> str:
    """Preprocessor lines that stop the CUDA compiler on a target below ``floor``.

    The kernel's target is unknown while TVM renders an intrinsic, so the helper carries its
    own requirement: ``__CUDA_ARCH__`` for the generation and ``__CUDA_ARCH_SPECIFIC__`` /
    ``__CUDA_ARCH_FAMILY_SPECIFIC__`` (nvcc 12.9+) for the ``a``/``f`` feature sets.
    """
    from .target import describe_floor

    version, suffix, *below = floor
    condition = f"__CUDA_ARCH__ >= {version * 10}"
    if below:
        condition += f" && __CUDA_ARCH__ < {below[0] * 10}"
    if suffix:
        condition += (" && (defined(__CUDA_ARCH_SPECIFIC__) || "
                      "defined(__CUDA_ARCH_FAMILY_SPECIFIC__))")
    return (f"#if defined(__CUDA_ARCH__) && !({condition})\n"
            f'#error "tvm_tma [arch]: {what} needs {describe_floor(floor)}"\n'
            "#endif\n")
