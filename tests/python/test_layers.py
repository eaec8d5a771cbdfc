"""The package's layers stay one-way and its imports acyclic (tvm_tma.testing.import_graph)."""

from __future__ import annotations

from pathlib import Path

from tvm_tma.testing import import_graph

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "tvm_tma"


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_package_is_one_way_and_acyclic():
    assert import_graph.check(PACKAGE) == []


def test_the_graph_sees_relative_absolute_and_function_level_imports():
    graph = import_graph.module_graph(PACKAGE)
    assert "tvm_tma.planner.plan_types" in graph["tvm_tma.intrin.host"]
    assert "tvm_tma.intrin.host" in graph["tvm_tma.dispatch.descriptors"]
    assert "tvm_tma.intrin" in graph["tvm_tma.dispatch.issue"]  # from .. import intrin
    assert "tvm_tma.intrin.target" in graph["tvm_tma.intrin.asm"]  # inside a function


def test_a_back_import_from_intrin_to_dispatch_is_caught(tmp_path):
    root = _write(tmp_path / "tvm_tma", {
        "__init__.py": "",
        "dispatch/__init__.py": "",
        "dispatch/descriptors.py": "from ..intrin.host import encode\n",
        "intrin/__init__.py": "",
        "intrin/host.py": "def encode():\n    from ..dispatch.descriptors import key\n",
    })
    assert import_graph.layer_violations(import_graph.module_graph(root)) == [
        "tvm_tma.intrin.host -> tvm_tma.dispatch.descriptors"]
    problems = import_graph.check(root)
    assert "layer: tvm_tma.intrin.host -> tvm_tma.dispatch.descriptors" in problems
    assert ("cycle: tvm_tma.dispatch.descriptors -> tvm_tma.intrin.host") in problems


def test_a_planner_cycle_and_a_planner_to_dispatch_import_are_caught(tmp_path):
    root = _write(tmp_path / "tvm_tma", {
        "__init__.py": "",
        "planner/__init__.py": "",
        "planner/descriptor.py": "from .rules import check_plan\nMAX_BOX = 256\n",
        "planner/rules.py": "from .descriptor import MAX_BOX\n",
        "planner/api.py": "import tvm_tma.dispatch.variant\n",
        "dispatch/__init__.py": "",
        "dispatch/variant.py": "from ..planner import api\n",
    })
    assert import_graph.check(root) == [
        "layer: tvm_tma.planner.api -> tvm_tma.dispatch.variant",
        "cycle: tvm_tma.dispatch.variant -> tvm_tma.planner.api",
        "cycle: tvm_tma.planner.descriptor -> tvm_tma.planner.rules",
    ]


def test_cycles_of_three_and_self_imports():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": set()}
    assert import_graph.cycles(graph) == [["a", "b", "c"], ["d"]]
