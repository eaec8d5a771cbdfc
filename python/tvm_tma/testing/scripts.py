"""Load a script of benchmarks/ or examples/ (not packages) as a module, by its path: what
the tests use instead of putting those folders on ``sys.path``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """The script at ``path`` executed as a module named ``name`` (default: its file stem)
    and registered under that name in ``sys.modules`` (dataclasses look their module up
    there). The caller gives the path: the installed package does not know where the
    repository is."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
