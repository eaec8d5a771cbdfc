"""One TIR op per intrinsic family: registration, CUDA codegen, and ``T.tma.<name>``.

A family is a spec schema (its attributes), a renderer (spec -> PTX instructions and operand
kinds) and a checker (spec + operands -> IntrinError or nothing). :func:`define` registers
the op ``tirx.tvm_tma_<name>`` (opaque, printed as ``T.tma.<name>``) and its codegen, which
renders the instruction into an inline-asm helper.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import tvm
from tvm.ir import register_op_attr
from tvm.tirx import CallEffectKind

from .asm import Instruction, arch_guard, helper_name, helper_source
from .operands import check_operand_kinds
from .spec import decode, encode
from .target import check_arch


@dataclass(frozen=True)
class Rendered:
    """The helper's instructions, its parameter kinds, and which parameters each one uses.

    ``arguments`` maps helper parameters to op operands (an operand may feed two parameters
    with different conversions, e.g. a descriptor used by a fence and by a mutator).
    """

    instructions: tuple[Instruction, ...]
    kinds: tuple[str, ...]
    routes: tuple[tuple[int, ...], ...]
    arguments: tuple[int, ...]


@dataclass(frozen=True)
class Family:
    name: str
    schema: dict[str, type]
    render: Callable[[dict], Rendered]
    check: Callable[[dict, Sequence], None]
    arch_floor: Callable[[dict], tuple[int, str]]  # (sm version, "" or "a"), e.g. (90, "a")

    @property
    def op_name(self) -> str:
        return f"tvm_tma_{self.name}"

    def call(self, fields: dict, operands: Sequence, arch: str | None = None):
        """Verify and build the TIR call (the one path every builder goes through)."""
        spec = decode(encode(fields), self.schema)  # normalizes and validates field types
        operands = list(operands)
        self.check(spec, operands)
        # Every operand against the class of the helper parameter it feeds (operand-type).
        # The builders have checked (and converted) their arguments already; this is what
        # checks the printed raw form.
        operands = check_operand_kinds(self.name, operands, self.operand_kinds(spec,
                                                                               len(operands)))
        check_arch(self.arch_floor(spec), arch, self.name)
        return tvm.tirx.call_intrin("void", "tirx." + self.op_name, encode(spec), *operands)

    def operand_kinds(self, spec: dict, count: int) -> list[str | None]:
        """The helper parameter kind (asm.OPERAND_KINDS) each op operand feeds first."""
        rendered = self.render(spec)
        kinds: list[str | None] = [None] * count
        for param, operand in enumerate(rendered.arguments):
            if operand < count and kinds[operand] is None:
                kinds[operand] = rendered.kinds[param]
        return kinds

    def call_raw(self, text: str, operands: Sequence, arch: str | None = None):
        """Rebuild a call from its printed form (``T.tma.<name>("k=v,...", *operands)``)."""
        return self.call(decode(text, self.schema), operands, arch)


FAMILIES: dict[str, Family] = {}


def define(family: Family) -> Family:
    if family.name in FAMILIES:
        return FAMILIES[family.name]
    op = "tirx." + family.op_name
    register_op_attr(op, "TCallEffectKind", CallEffectKind.Opaque.value)
    register_op_attr(op, "TScriptPrinterName", f"tma.{family.name}")
    _register_codegen(family)
    FAMILIES[family.name] = family
    return family


def _register_codegen(family: Family) -> None:
    from tvm.backend.cuda.codegen.registry import register_codegen
    from tvm.backend.cuda.op import cuda_func_call

    def codegen(spec_text, *operands):
        text = spec_text.value if hasattr(spec_text, "value") else str(spec_text)
        spec = decode(text, family.schema)
        target = tvm.target.Target.current(allow_none=True)
        if target is not None:
            check_arch(family.arch_floor(spec), str(target.attrs.get("arch", "")), family.name)
        rendered = family.render(spec)
        name = helper_name(family.name, text)
        source = arch_guard(family.arch_floor(spec), f"{family.name} ({text})") + \
            helper_source(name, list(rendered.instructions), rendered.kinds,
                          list(rendered.routes))
        args = [operands[i] for i in rendered.arguments]
        return cuda_func_call(name, *args, source_code=source)

    register_codegen(family.op_name)(codegen)


def straight(kinds: Sequence[str], template: str) -> Rendered:
    """A single instruction whose operands are the op operands in order."""
    kinds = tuple(kinds)
    route = tuple(range(len(kinds)))
    return Rendered((Instruction(template, kinds),), kinds, (route,), route)
