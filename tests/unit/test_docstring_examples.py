"""Every ``>>>`` example in partplan's docstrings runs as written and prints what it says (the
examples are part of the reference: an example whose output drifted tells the reader something
false)."""
from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import partplan

ROOT = Path(partplan.__file__).parent


def _modules() -> list[str]:
    names = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "__main__.py" or ">>>" not in path.read_text(encoding="utf-8"):
            continue
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        names.append(".".join(parts))
    return names


MODULES = _modules()


def test_the_examples_are_found():
    assert len(MODULES) > 40 and "partplan.partition.schema" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, tmp_path, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # the examples' mkdtemp() folders: pytest's to remove
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=True,
                             verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed (their output is above)"
