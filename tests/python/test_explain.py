"""``python -m tvm_tma explain`` and ``tvm_tma.explain``: plans, refusals, bad files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tvm_tma
from tvm_tma.explainer import ExplainError, find_functions, format_kernel, load_module
from tvm_tma.explainer.cli import run
from tvm_tma.explainer.hints import RULE_HINTS
from tvm_tma.planner import RULES
from tvm_tma.testing.runner import assemble, compile_kernel

INPUTS = Path(__file__).parent / "explain_inputs"

#: (line, rule, detail) of each copy of explain_inputs/refusals.py, in order; every detail
#: names the value that broke the rule.
REFUSALS = [
    (36, "layout-mismatch", "shared iterator of extent 32 and global extent 24 do not divide "
     "each other"),
    (37, "dtype", "dst dtype float16 != src dtype int16"),
    (38, "region-bounds", "global dimension 0: region [cta * 64, cta * 64 + 64) is not "
     "provably inside [0, 256); a tile that may cross the tensor's edge needs "
     'oob="zero" or "nan"'),
    (40, "inner-coordinate-16B", "the box starts 8 bytes into dimension 0, not provably a "
     "multiple of 16"),
    (41, "innermost-stride", "the region's stride-1 shared axis has global stride 64 "
     "elements; the TMA box's inner dimension must be contiguous in global memory"),
    (42, "swizzle-span", "inner box of 64 bytes does not fill whole 128-byte swizzle spans"),
    (43, "smem-align-128", "shared address offset 49216 bytes (allocation aligned to 1024) "
     "is not provably a multiple of 128"),
    (44, "swizzle-base-period", "swizzled shared buffer starts 32896 bytes into its "
     "allocation, not provably on the 1024-byte pattern period"),
    (45, "global-stride", "global stride of dimension 1 is 120 bytes, not a multiple of 16"),
    (46, "inner-box-16B", "inner box is 8 bytes, not a multiple of 16"),
    (47, "config", "a global->shared TMA copy needs mbar=<mbarrier address>: the hardware "
     "signals completion on it"),
    (48, "mbar", "mbar=5 is a constant; it must be the shared-memory address of an "
     "mbarrier, e.g. mbar=bars.ptr_to([stage])"),
    (49, "cache-hint", "cache_hint='evict_sometimes' is not an L2 eviction priority (one of "
     "['evict_first', 'evict_last', 'evict_normal', 'evict_unchanged'], or a uint64 policy "
     "from createpolicy)"),
    (51, "direction", "not a global<->shared copy (src global, dst local)"),
]


def _cli(capsys, *argv) -> tuple[int, str, str]:
    path, *rest = argv
    func = rest[rest.index("--func") + 1] if "--func" in rest else None
    arch = rest[rest.index("--arch") + 1] if "--arch" in rest else "sm_90a"
    status = run(str(path), func, arch)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_every_rule_has_a_hint():
    assert set(RULE_HINTS) == set(RULES)


def test_refusals_name_rule_value_and_a_way_out():
    kernel = tvm_tma.explain(load_module(INPUTS / "refusals.py").bad_copies)
    assert kernel.name == "bad_copies"
    got = [(c.line, c.rule, c.detail) for c in kernel.copies]
    assert got == REFUSALS
    assert len({rule for _, rule, _ in REFUSALS}) == 14
    assert all(not c.planned and c.hint == RULE_HINTS[c.rule] for c in kernel.copies)


def test_refusals_printed(capsys):
    status, out, _ = _cli(capsys, INPUTS / "refusals.py")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "kernel bad_copies (sm_90a): 14 TMA copies, 0 planned, 14 refused"
    for line, rule, detail in REFUSALS:
        assert f"    refused [{rule}]: {detail}" in lines
        assert f"    to plan: {RULE_HINTS[rule]}" in lines
    # a statement written over two lines is shown whole
    assert ('  line 38: Tx.copy_async(tile[:, :], A[cta * 64:cta * 64 + 64, :], '
            'dispatch="tma", mbar=mbar.ptr_to([0]))') in lines


PLANNED_LOAD = """\
  line 25: Tx.copy_async(tile[:, :], A[cta * TILE:cta * TILE + TILE, :], dispatch="tma", \
mbar=mbar.ptr_to([0]))
    g2s: planned, 1 issue(s) of 8192 bytes, rank 2
    tensor map (cuTensorMapEncodeTiled, innermost first):
      tensorDataType = float16
      tensorRank = 2
      globalDim = [64, 8448]
      globalStrides = [128]
      boxDim = [64, 64]
      elementStrides = [1, 1]
      interleave = NONE
      swizzle = 128B
      l2Promotion = 128B
      oobFill = NONE
    instruction: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
    first issue: coordinates (0, cta * 64), shared offset 0 elements
    issue loop: none (one issue)
    proved:
      region-bounds (global dimension 0): cta * 64 >= 0 and cta * 64 + 64 <= 8448   \
[from cta in [0, 132)]"""


def test_planned_copy_prints_the_exact_map(capsys):
    status, out, _ = _cli(capsys, INPUTS / "planned.py", "--func", "row_tiles")
    assert status == 0
    assert out.startswith("kernel row_tiles (sm_90a): 2 TMA copies, 2 planned, 0 refused\n"
                          + PLANNED_LOAD + "\n")
    # the store inside `for part in range(2)`: the loop's range proves its coordinate
    assert "      globalDim = [128, 8448]" in out
    assert "    first issue: coordinates (part * 64, cta * 64), shared offset 0 elements" in out
    assert ("      region-bounds (global dimension 1): part * 64 >= 0 and part * 64 + 64 <= "
            "128   [from part in [0, 2)]") in out
    assert ("    instruction: cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"
            ".L2::cache_hint") in out


def test_explained_plan_is_what_the_dispatch_emits():
    func = load_module(INPUTS / "planned.py").row_tiles
    kernel = tvm_tma.explain(func)
    built = compile_kernel(func)
    assert sorted(built.tma_asm_lines) == sorted(
        f"{copy.instruction} [%0], [%1, {{%2, %3}}], [%4];" if copy.direction == "g2s" else
        f"{copy.instruction} [%0, {{%1, %2}}], [%3], %4;" for copy in kernel.copies)
    assert built.tensormap_params == len({c.plan.tensor_map for c in kernel.copies}) == 2
    assemble(built.cuda_source)


def test_builder_function_and_arch(capsys):
    status, out, _ = _cli(capsys, INPUTS / "planned.py", "--func", "builder", "--arch",
                          "sm_100a")
    assert status == 0
    assert out.splitlines()[0] == "kernel whole (sm_100a): 1 TMA copy, 1 planned, 0 refused"
    assert ("    instruction: cp.async.bulk.tensor.2d.shared::cluster.global"
            ".mbarrier::complete_tx::bytes.cta_group::1") in out
    assert "    proved: every fact is a constant" in out
    assemble(compile_kernel(load_module(INPUTS / "planned.py").builder()).cuda_source)


def test_all_functions_of_a_file(capsys):
    module = load_module(INPUTS / "planned.py")
    assert [name for name, _ in find_functions(module)] == ["row_tiles"]
    status, out, _ = _cli(capsys, INPUTS / "refusals.py", "--func", "bad_copies")
    assert status == 0 and out.count("refused [") == 14


def test_a_file_without_tma_copies_says_so(capsys, tmp_path):
    path = tmp_path / "plain.py"
    path.write_text(
        "from tvm.script import tirx as T\n\n\n"
        "@T.prim_func\n"
        "def add_one(A: T.Buffer((16,), \"float32\")):\n"
        "    for i in range(16):\n"
        "        A[i] = A[i] + T.float32(1)\n")
    status, out, _ = _cli(capsys, path)
    assert status == 0
    assert out.strip() == 'kernel add_one (sm_90a): no copy_async(..., dispatch="tma")'
    assert format_kernel(tvm_tma.explain(load_module(path).add_one)) == out.strip()


@pytest.mark.parametrize("source, message", [
    ("def broken(:\n", "cannot be imported: SyntaxError: "),
    ("import not_a_module_anywhere\n", "cannot be imported: ModuleNotFoundError: No module "
     "named 'not_a_module_anywhere'"),
    ("raise RuntimeError('boom')\n", "cannot be imported: RuntimeError: boom"),
    ("import sys\nsys.exit(3)\n", "exited while being imported (status 3)"),
    ("VALUE = 1\n", "no @T.prim_func at module level (name a function that builds one with "
     "--func)"),
])
def test_bad_files_give_one_clear_line(capsys, tmp_path, source, message):
    path = tmp_path / "bad.py"
    path.write_text(source)
    status, out, err = _cli(capsys, path)
    assert status == 2 and out == ""
    assert err.startswith(f"explain: {path}: {message}")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_missing_file_and_missing_function(capsys, tmp_path):
    status, _, err = _cli(capsys, tmp_path / "absent.py")
    assert (status, err) == (2, f"explain: {tmp_path / 'absent.py'}: no such file\n")
    status, _, err = _cli(capsys, INPUTS / "planned.py", "--func", "nothing")
    assert status == 2 and err.endswith("has no attribute 'nothing'\n")
    status, _, err = _cli(capsys, INPUTS / "planned.py", "--func", "TILE")
    assert (status, err) == (2, "explain: TILE is a int, not a PrimFunc\n")
    with pytest.raises(ExplainError):
        find_functions(load_module(INPUTS / "planned.py"), "ROWS")


def test_module_entry_point():
    result = subprocess.run([sys.executable, "-m", "tvm_tma", "explain",
                             str(INPUTS / "planned.py"), "--func", "builder"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("kernel whole (sm_90a): 1 TMA copy, 1 planned")
