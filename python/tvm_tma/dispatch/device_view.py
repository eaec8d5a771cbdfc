"""Device-side views: a copy whose tensor map the issuing thread rebinds on the device.

A view whose start or extent is a device-side value -- rows ``offs[g - 1]:offs[g]`` of A,
read from device memory inside the kernel -- cannot be encoded on the host: no host value
names its base address or its row count. The planner plans it against the view itself (the
map's base ``data + offset``, its dims the view's, so a tile that crosses the view's end
reads zeros or stops storing in hardware) and marks the plan ``device_view``; this module
turns such a plan into a device-born map (seed 000):

* **Template.** The host encodes one map over the kernel argument the view aliases, with
  every host-born field of the plan (element type, box, element strides, swizzle,
  interleave, fill, L2 promotion) and placeholders for the fields the device sets. It is
  the ordinary ``__grid_constant__`` parameter, cached per distinct template.
* **Slot.** ``tensormap=`` names 256 bytes of a global workspace: two 128-byte slots.
  Global, because ``cp.async.bulk.tensor`` reads its map from param, const or global
  memory only; 128-byte aligned, because ``tensormap.replace`` addresses a ``.b1024``
  object; owned by one CTA (the slot's offset steps by at least 256 bytes per CTA index,
  proven here), because two CTAs rebinding one slot would race. Two slots, used in turn,
  because the copies of the previous view may still sit in the TMA unit's queue when the
  next view arrives: a rebind never rewrites the map those copies name, only the one
  before it, whose copies were issued a whole view (a tile's K loop) earlier.
* **Tag.** Each issuing thread keeps, in registers allocated at the kernel's start (after
  the shared allocation), the device values its slot was last rebound for and a count of
  its rebinds. A copy compares the view's values with the tag; only when they differ does
  it take the other slot, seed it from the template (128 bytes, generic stores), rebind it
  (``fence.proxy.tensormap::generic.acquire``, global_address, global_dim 0..rank-1,
  global_stride 1..rank-1, release) and acquire it for the tensormap proxy before the
  first ``cp.async.bulk.tensor`` that reads it. So the sequence runs once per view
  change, by the issuing thread, and never without its fences.

What the host cannot check becomes a proof obligation at the copy (``tensormap-slot``:
alignment, size, ownership; ``global-stride``, ``global-dim``, ``global-address-align``
for the device-side values; ``global-view-bounds``: the view inside its argument), or a
launch check where only the host knows the value (the workspace's base alignment, in the
C++ runtime: ``tvm_tma.check_map_slots``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import tvm
from tvm.script import tirx as T
from tvm.tirx import AllocBuffer, BufferStore, SeqStmt

from .. import intrin
from ..planner.errors import refuse
from ..planner.plan_types import TensorMapSpec, TmaPlan
from ..planner.proofs import Prover, as_int
from ..planner.views import element_offset
from .build import build_prim_func
from .operands import pointed_element

#: Bytes of one map slot (the ``.b1024`` object tensormap.replace writes).
SLOT_BYTES = 128
#: Slots a ``tensormap=`` operand holds: the map being used and the previous one.
SLOTS = 2


@dataclass(frozen=True)
class SlotPair:
    """The ``tensormap=`` operand: two 128-byte slots in a global workspace."""

    pointer: object  # the operand as written (``maps.ptr_to([cta, 0])``)
    buffer: object  # the workspace buffer it points into
    byte_offset: object  # from the buffer's data pointer

    @property
    def key(self) -> str:
        return f"{self.buffer.name}+{self.byte_offset}"


def device_view_slots(value, view, argument, prover: Prover, cta_vars: dict,
                      identities: tuple = ()) -> SlotPair:
    """The slots of a copy whose plan is device-born: ``tensormap=`` given and valid
    (:func:`read_slots`), the view declared over a kernel argument (the template's
    buffer)."""
    if value is None:
        raise refuse("tensormap-slot", f"the global view {view.name} starts or ends at a "
                     "device-side value, so its map is rebound on the device: pass "
                     "tensormap=<two 128-byte slots of a global workspace, e.g. "
                     "maps.ptr_to([cta, 0])>")
    if argument is None or argument.same_as(view):
        raise refuse("tensormap-slot", f"the device-side view {view.name} must be declared "
                     "over a kernel argument's data (the template map is encoded over that "
                     "argument on the host)")
    return read_slots(value, prover, cta_vars, identities)


def read_slots(value, prover: Prover, cta_vars: dict, identities: tuple = ()) -> SlotPair:
    """Validate ``tensormap=``; ``cta_vars`` maps each variable that tells CTAs apart (and
    takes more than one value) to its extent, ``identities`` lists the subsets of them that
    tell every CTA apart on their own (:func:`.facts.cta_identities_of`)."""
    located = pointed_element(value)
    if located is None:
        raise refuse("tensormap-slot", f"tensormap={value!r} must point into a global "
                     "workspace buffer, e.g. tensormap=maps.ptr_to([cta, 0]) (two 128-byte "
                     "slots of the issuing CTA)")
    buffer, indices = located
    if str(buffer.scope()) != "global":
        raise refuse("tensormap-slot", f"tensormap= points into {buffer.scope()!r} memory "
                     f"({buffer.name}); cp.async.bulk.tensor reads its map from global "
                     "memory, so the slots live in a global workspace")
    width = tvm.DataType(str(buffer.dtype)).bits // 8
    offset = prover.simplify(element_offset(buffer, indices, prover) * width)
    if not prover.establish_divisible(offset, SLOT_BYTES, "tensormap-slot (alignment)"):
        raise refuse("tensormap-slot", f"tensormap= is {offset} bytes into {buffer.name}, "
                     f"not provably a multiple of {SLOT_BYTES} (tensormap.replace writes a "
                     "128-byte aligned object)")
    size = 1
    for extent in buffer.shape:
        size = size * extent
    total = prover.simplify(size * width)
    if not prover.establish(tvm.tirx.all(offset >= 0,
                                         offset + SLOTS * SLOT_BYTES <= total),
                            "tensormap-slot (inside the workspace)"):
        raise refuse("tensormap-slot", f"tensormap= needs {SLOTS * SLOT_BYTES} bytes at "
                     f"byte {offset} of {buffer.name} ({total} bytes), not provably inside")
    _check_owned_by_cta(offset, buffer, prover, cta_vars, identities)
    return SlotPair(value, buffer, offset)


def _check_owned_by_cta(offset, buffer, prover: Prover, cta_vars: dict,
                        identities: tuple = ()) -> None:
    """Each CTA's slots are its own: over all the variables that tell CTAs apart (CTA,
    cluster, rank in the cluster), or over one of ``identities`` (a set of them that
    alone tells every CTA apart: the CTA index of a cluster kernel), the offset is
    ``rest + sum of c_i * v_i`` in mixed radix (:func:`_check_mixed_radix`)."""
    if not cta_vars:
        return  # one CTA: nothing to share with
    refusals = []
    for variables in (tuple(cta_vars), *identities):
        try:
            return _check_mixed_radix(offset, buffer, prover, cta_vars, list(variables))
        except ValueError as refusal:
            refusals.append(refusal)
    raise refusals[0]  # the proof over every index: what the kernel must give


def _check_mixed_radix(offset, buffer, prover: Prover, cta_vars: dict, variables: list
                       ) -> None:
    """With ``variables`` ordered by ``|c_i|``, each ``|c_i|`` exceeds everything the
    smaller terms and ``rest`` (the other terms, bounded by the prover) can reach plus the
    256 bytes of a slot pair, so two CTAs' slots never share a byte."""
    coefficients = tvm.sym.detect_linear_equation(offset, variables)
    span = SLOTS * SLOT_BYTES
    names = ", ".join(v.name for v in variables)
    if len(coefficients) != len(variables) + 1:
        raise refuse("tensormap-slot", f"tensormap= slot offset {offset} is not linear in "
                     f"the CTA indices ({names}); give each CTA its own slots, e.g. "
                     f"{buffer.name}.ptr_to([cta, 0])")
    steps = [as_int(prover.simplify(c)) for c in coefficients[:-1]]
    rest = prover.simplify(coefficients[-1])
    bound = prover.analyzer.const_int_bound(rest) if as_int(rest) is None else None
    low = as_int(rest) if bound is None else bound.min_value
    reach = (as_int(rest) if bound is None else bound.max_value) + span
    ordered = sorted(zip(steps, variables), key=lambda pair: abs(pair[0] or 0))
    for step, var in ordered:
        extent = as_int(cta_vars[var])
        if step is None or extent is None or low < 0 or abs(step) < reach:
            raise refuse("tensormap-slot", f"tensormap= at byte {offset} of {buffer.name}: "
                         f"two CTAs may share a slot (each needs its own {span} bytes; the "
                         f"offset steps by {step} per {var.name}, whose smaller terms reach "
                         f"{reach} bytes); a slot rebound by two CTAs at once is a race")
        reach += abs(step) * (extent - 1)


#: The runtime's launch-time check of a workspace's alignment (ValueError naming the rule).
CHECK_SLOTS_FUNCTION = "tvm_tma.check_map_slots"


def emit_slot_check(slots: SlotPair, sctx) -> None:
    """Check at launch, once per workspace, that its data pointer is 128-byte aligned (the
    offset was proven; only the launch knows the pointer)."""
    key = f"tvm_tma.slot_check:{slots.buffer.name}"
    cached = sctx.cache_get(key)
    if cached is not None and cached[0].same_as(slots.buffer):
        return

    def check():
        T.evaluate(T.call_packed(CHECK_SLOTS_FUNCTION, slots.buffer.data, SLOT_BYTES,
                                 slots.buffer.name))
        T.evaluate(T.tvm_kernel_replace_point())

    sctx.add_init_stmt(build_prim_func(check).body, host=True)
    sctx.cache_set(key, [slots.buffer])


def template_spec(spec: TensorMapSpec, prover: Prover) -> TensorMapSpec:
    """The host-born template of a device-born map: the plan's spec with each device-side
    dim 1 and each device-side stride the dense stride over the template's dims (any legal
    value serves: the rebind replaces them before any copy reads the map)."""
    dims = tuple(size if prover.is_host_expr(size) else 1 for size in spec.global_dims)
    strides = []
    previous = spec.element_bytes
    for index, stride in enumerate(spec.global_strides, start=1):
        if prover.is_host_expr(stride):
            strides.append(stride)
            previous = stride
            continue
        below = as_int(dims[index - 1])
        dense = previous * (below if below is not None else 1)
        placeholder = -(-dense // 16) * 16 if isinstance(dense, int) else 16
        strides.append(placeholder)
        previous = placeholder
    return replace(spec, global_dims=dims, global_strides=tuple(strides))


@dataclass(frozen=True)
class Rebind:
    """The device-side fields of one copy's map and the tag they are compared with."""

    address: object  # uint64 global address of the map's base
    dims: tuple  # every dim, driver order
    strides: tuple  # byte strides of dims 1..rank-1
    watched: tuple  # the device-side values (address first) the tag holds


def rebind_fields(plan: TmaPlan, view, prover: Prover) -> Rebind:
    """The values a rebind writes for ``plan`` over the global view ``view``."""
    spec = plan.tensor_map
    width = tvm.DataType(str(view.dtype)).bits // 8
    base = prover.simplify(plan.base_offset * width)
    address = tvm.tirx.reinterpret("uint64", view.data)
    if as_int(base) != 0:
        address = address + tvm.tirx.Cast("uint64", base)
    dims = tuple(spec.global_dims)
    strides = tuple(spec.global_strides)
    watched = (address, *[tvm.tirx.Cast("uint64", value) for value in dims + strides
                          if not prover.is_host_expr(value)])
    return Rebind(address, dims, strides, watched)


def tag_buffer(sctx, slots: SlotPair, count: int, shared_allocation, template_key: str):
    """The issuing thread's tag registers for ``slots`` (``count`` watched values, then the
    rebind count), allocated once per kernel right after the shared allocation and zeroed
    there (no map's base is address 0, so the first copy always rebinds)."""
    index = 0
    while True:  # the cache spans every function of the module: match the buffer itself
        key = f"tvm_tma.slot_tag:{slots.key}#{index}"
        cached = sctx.cache_get(key)
        if cached is None:
            break
        tag, known_template, buffer = cached[0], str(cached[1]), cached[2]
        if buffer.same_as(slots.buffer):
            if known_template != template_key or int(tag.shape[0]) != count + 1:
                raise refuse("tensormap-slot", f"tensormap= slots {slots.key} already hold "
                             "the map of another copy; give each device-side map its own "
                             "slots")
            return tag
        index += 1
    if shared_allocation is None:
        raise refuse("tensormap-slot", "a copy of a device-side view keeps its rebind state "
                     "next to the kernel's shared allocation, which this copy's shared "
                     "buffer does not show (declare it over a T.alloc_buffer of the kernel)")
    tag = tvm.tirx.decl_buffer((count + 1,), "uint64", name="tma_view_tag", scope="local")
    zero = [BufferStore(tag, tvm.tirx.const(0, "uint64"), [i]) for i in range(count + 1)]
    sctx.add_post_buffer_def_stmt(shared_allocation, SeqStmt([AllocBuffer(tag), *zero]))
    sctx.cache_set(key, [tag, tvm.runtime.convert(template_key), slots.buffer])
    return tag


def emit_rebind(rebind: Rebind, slots: SlotPair, tag, tensor_map, arch: str):
    """Emit (into the body being built) the view-change test and, under it, the rebind;
    return the address of the slot the copy's issues name."""
    count = len(rebind.watched)
    base = tvm.tirx.reinterpret("uint64", slots.pointer)

    def current():
        parity = tvm.tirx.bitwise_and(tag[count], tvm.tirx.const(1, "uint64"))
        return base + parity * tvm.tirx.const(SLOT_BYTES, "uint64")

    changed = tvm.tirx.const(False, "bool")
    for index, value in enumerate(rebind.watched):
        changed = tvm.tirx.Or(changed, tag[index] != value)
    with T.If(changed):
        with T.Then():
            T.buffer_store(tag, tag[count] + tvm.tirx.const(1, "uint64"), [count])
            slot = current()
            T.evaluate(intrin.seed(slot, T.address_of(tensor_map), arch=arch))
            T.evaluate(intrin.rebind(slot, rebind.address, list(rebind.dims),
                                     list(rebind.strides), scope="cta", space="global",
                                     arch=arch))
            T.evaluate(intrin.fence_acquire(slot, scope="cta", arch=arch))
            for index, value in enumerate(rebind.watched):
                T.buffer_store(tag, value, [index])
    return current()
