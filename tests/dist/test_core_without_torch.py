"""The core (graph, io, metrics, partition, plan, CLI parser) must import
without torch: torch is only the runtime's dependency."""
import subprocess
import sys

import pytest

CODE = r"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch blocked for this test")
sys.meta_path.insert(0, Block())
import partplan, partplan.metrics, partplan.partition, partplan.models, partplan.io, partplan.plan
from partplan.cli.main import build_parser
build_parser()
assert "torch" not in sys.modules
print("ok")
"""


@pytest.mark.dist
@pytest.mark.slow
def test_core_imports_without_torch():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")
