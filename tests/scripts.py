"""The console scripts the launch tests start (``partplan``, ``torchrun``), found beside this Python."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest


def script_beside_python(name: str) -> Path:
    """The console script ``name`` installed beside ``sys.executable``; the test is skipped when it
    is not there (an install without the script)."""
    exe = Path(sys.executable).with_name(name)
    if not exe.exists():
        pytest.skip(f"{name} is not installed beside this python")
    return exe
