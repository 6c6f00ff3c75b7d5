"""``partplan plan --nprocs 2`` of every layout on a full disk: one line naming the plan and its
folder, exit 2, nothing left there; with room, the plan is written and validates."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from partplan.io.chunked import write_chunked


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    from partplan.datasets.generators import rmat
    d = tmp_path_factory.mktemp("g")
    g = rmat(11, seed=5)
    np.save(d / "p4.npy", np.arange(g.n) % 4)
    np.save(d / "p2.npy", np.arange(g.n) % 2)
    return write_chunked(g, d / "g.chunked", chunks=4), d


def _plan(args):
    r = subprocess.run([sys.executable, "-m", "partplan", "-q", "plan", *map(str, args)], capture_output=True,
                       text=True, timeout=300)
    return r.returncode, r.stderr


@pytest.mark.slow
@pytest.mark.dist
@pytest.mark.parametrize("layout,part", [("1d", "p4.npy"), ("2d:2x2", "p4.npy"), ("1.5d:2", "p2.npy")])
def test_distributed_build_on_a_full_disk_is_one_line_naming_the_plan(inputs, tmpfs, layout, part):
    path, d = inputs
    mnt = tmpfs("size=4m")
    tmpfs.fill(mnt, 64 << 10)
    rc, err = _plan([path, "--partition", d / part, "--layout", layout, "-o", mnt / "x.plan", "--nprocs", 2])
    assert rc == 2 and "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("partplan: error:")]
    assert len(lines) == 1 and f"{mnt / 'x.plan'}: not enough space in {mnt}" in lines[0], err
    assert sorted(p.name for p in mnt.iterdir()) == ["pad"]
    (mnt / "pad").unlink()
    rc, err = _plan([path, "--partition", d / part, "--layout", layout, "-o", mnt / "x.plan", "--nprocs", 2])
    assert rc == 0, err
    r = subprocess.run([sys.executable, "-m", "partplan", "-q", "validate", str(mnt / "x.plan")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
