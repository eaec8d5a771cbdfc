"""The fuzzer's regression-file writer: a case -> a pytest module that pins it.

It exists apart from the shrinker (:mod:`.fuzz_shrink`, which minimizes a failing case) and
the GPU mode (which names its kernels' libraries by :func:`case_digest`) because all they
share is how a case is named and written down: :func:`save_regression` writes a case as
``test_case_<hash>.py``, which imports ``check_case`` from the ``fuzz`` facade (and
``LoopForm`` when the case is a persistent loop).
"""

from __future__ import annotations

import dataclasses
import hashlib
import textwrap
from pathlib import Path

from .copy_cases import CopyCase
from .fuzz_checks import Outcome

#: Where the suite collects the saved regression tests (the CLI's ``--save-failures`` hint).
REGRESSION_DIR = Path("tests/python/fuzz_regressions")


#: Fields added to :class:`CopyCase` after digests were first written: left out of the digest
#: at their defaults, so every older case keeps its digest (and its regression file's name).
_LATER_FIELDS = {"cluster": 0, "reduce": None, "loop": None, "device_view": False}


def case_digest(case: CopyCase) -> str:
    """A stable short hash of a case's content (its name excluded)."""
    fields = dataclasses.asdict(dataclasses.replace(case, name=""))
    for name, default in _LATER_FIELDS.items():
        if fields[name] == default:
            del fields[name]
    return hashlib.sha1(repr(sorted(fields.items())).encode()).hexdigest()[:12]


def case_source(case: CopyCase, indent: str = "    ") -> str:
    """``CopyCase(...)`` as Python source, one field per line."""
    lines = ["CopyCase("]
    for item in dataclasses.fields(case):
        value = getattr(case, item.name)
        if value == item.default or (item.name == "expect" and not value):
            continue
        lines.append(f"{indent}{item.name}={value!r},")
    lines.append(")")
    return "\n".join(lines)


def regression_source(case: CopyCase, outcome: Outcome, origin: str) -> str:
    """The text of the regression test module that pins ``case`` (see :func:`save_regression`)."""
    digest = case_digest(case)
    problem = " ".join(outcome.problem.split())[:300]
    loop_import = "" if case.loop is None else (
        "from tvm_tma.testing.loop_forms import LoopForm\n")
    return f'''"""Fuzzer regression {digest}: {outcome.kind}.

Minimized from {origin}. Failure when found:
{_wrap(problem)}
"""

from tvm_tma.testing.copy_cases import CopyCase
from tvm_tma.testing.fuzz import check_case
{loop_import}
CASE = {case_source(case)}


def test_fuzz_regression_{digest}():
    outcome = check_case(CASE)
    assert outcome.status != "mismatch", f"{{outcome.kind}}: {{outcome.problem}}"
'''


def _wrap(text: str, width: int = 96) -> str:
    return "\n".join(textwrap.wrap(text, width)) or "(no detail)"


def save_regression(case: CopyCase, outcome: Outcome, directory: Path | str,
                    origin: str = "") -> Path:
    """Write ``case`` as ``<directory>/test_case_<hash>.py`` (a pytest module)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"test_case_{case_digest(case)}.py"
    path.write_text(regression_source(case, outcome, origin or case.name))
    return path
