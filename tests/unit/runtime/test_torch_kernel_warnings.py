"""The torch kernel set runs on a plan's read-only (memory-mapped) arrays without torch's warnings about
non-writable arrays or its beta sparse CSR support reaching the user (the native kernels say nothing)."""
from __future__ import annotations

import warnings

import pytest

pytest.importorskip("torch")

from tests.errlines import run_cli  # noqa: E402


@pytest.mark.parametrize("job", [["pagerank"], ["wcc"], ["sssp", "--root", "0"]])
def test_torch_kernels_say_no_torch_warning(tmp_path, capsys, job):
    plan = tmp_path / "p.plan"
    rc, _, err = run_cli(["partition", "polblogs", "-k", 3, "--preset", "fast", "-q", "-o", plan], capsys)
    assert rc == 0, err
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rc, _, err = run_cli(["run", *job[:1], plan, *job[1:], "--backend", "local", "--kernels", "torch", "-q",
                              "--output", tmp_path / "out.npy"], capsys)
    assert rc == 0, err
    said = [str(w.message) for w in seen] + err.splitlines()
    assert not [s for s in said if "not writable" in s or "Sparse CSR" in s or "invariant checks" in s], said
