"""Helpers the tests share (imported as `from helpers import ...`: pytest puts tests/ on the path); fixtures stay in
conftest.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_script(name: str) -> ModuleType:
    """scripts/NAME.py as a module (registered under NAME, so its dataclasses resolve their annotations)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
