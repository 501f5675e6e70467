"""The agent's tests: plain pytest, no Django, no database, no GPU."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

AGENT_SRC = Path(__file__).resolve().parents[2] / "agent"
if str(AGENT_SRC) not in sys.path:
    sys.path.insert(0, str(AGENT_SRC))

FAKE_NVML = Path(__file__).resolve().parent / "fake_nvml" / "pynvml.py"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def fake_nvml() -> Iterator[ModuleType]:
    """A fresh fake pynvml module with one GPU, private to the test."""
    spec = importlib.util.spec_from_file_location("fake_pynvml", FAKE_NVML)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fake_pynvml"] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
        module.reset(1)
        yield module
    finally:
        sys.modules.pop("fake_pynvml", None)
