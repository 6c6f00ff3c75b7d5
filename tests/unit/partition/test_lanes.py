"""Side-by-side pieces of the default pipeline (partition/lanes.py): the partition does not depend
on the number of cores, errors reach the caller, and Mt-KaHyPar's DETERMINISTIC start gives the
same partition at any thread count (each count in its own process: the pool is process-wide)."""
import json
import subprocess
import sys
import threading

import numpy as np
import pytest

from partplan.graph import Graph
from partplan.partition.pipeline.lanes import Lanes, available_cores


def test_results_come_back_in_submit_order_and_errors_reach_the_caller():
    for workers in (1, 2, 3):
        lanes = Lanes(workers)
        gate = threading.Event()

        def slow(x):
            gate.wait(5)
            return x * 10

        if workers == 1:   # serial: submit runs the task at once, so the gate must already be open
            gate.set()
        tasks = [lanes.submit(slow, 1), lanes.submit(lambda: 2)]
        gate.set()
        assert [t.result() for t in tasks] == [10, 2]
        if workers == 1:   # at once, in the caller: the error is raised by submit, as serial code
            with pytest.raises(ZeroDivisionError):
                lanes.submit(lambda: 1 / 0)
        else:
            bad = lanes.submit(lambda: 1 / 0)
            with pytest.raises(ZeroDivisionError):
                bad.result()
    assert available_cores() >= 1


def test_no_more_than_workers_run_at_once():
    lanes, lock, now, peak = Lanes(2), threading.Lock(), [0], [0]

    def body():
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        threading.Event().wait(0.05)
        with lock:
            now[0] -= 1

    for t in [lanes.submit(body) for _ in range(6)]:
        t.result()
    assert peak[0] == 2


def _geo(n, seed=0):
    rng = np.random.default_rng(seed)
    pts = rng.random((n, 2))
    from scipy.spatial import cKDTree
    _, nb = cKDTree(pts).query(pts, 6)
    return Graph.from_edges(np.repeat(np.arange(n), 5), nb[:, 1:].ravel(), n=n, symmetrize=True,
                            self_loops="remove", name="geo")


@pytest.mark.parametrize("n", [1200, 9000])   # small: three starts (Mt-KaHyPar too); larger: two, both refined
def test_default_partition_is_the_same_with_one_worker_and_several(n, monkeypatch):
    pytest.importorskip("kaminpar")
    from partplan.partition.pipeline import auto as pipeline

    g = _geo(n)
    serial, rs = pipeline.auto_partition(g, 8, threads=1)
    # threads=None: as many workers as cores (3 here, whatever this machine has); KaMinPar keeps one
    monkeypatch.setattr(pipeline, "available_cores", lambda: 3)
    side, rp = pipeline.auto_partition(g, 8)
    assert rs["workers"] == 1 and rp["workers"] == 3
    assert np.array_equal(serial, side)
    assert rs["refine"]["rounds"] == rp["refine"]["rounds"]
    assert [r["figures"] for r in rs["starts"]] == [r["figures"] for r in rp["starts"]]


_MTK_CHILD = r"""
import json, sys, hashlib
import numpy as np
from scipy.spatial import cKDTree
from partplan.graph import Graph
from partplan.partition.engines import mtkahypar_graph
rng = np.random.default_rng(3)
pts = rng.random((3000, 2))
_, nb = cKDTree(pts).query(pts, 6)
mesh = Graph.from_edges(np.repeat(np.arange(3000), 5), nb[:, 1:].ravel(), n=3000, symmetrize=True, self_loops="remove")
# a skewed graph too: preferential-attachment-like endpoints (hubs), where a parallel engine's
# tie-breaking has the most room to differ
n = 4000
src = rng.integers(0, n, 24000)
dst = (rng.pareto(1.2, 24000) * 20).astype(np.int64) % n
skew = Graph.from_edges(src, dst, n=n, symmetrize=True, self_loops="remove")
out = {}
for name, g in (("mesh", mesh), ("skew", skew)):
    part, cut = mtkahypar_graph(g, 16, preset="DETERMINISTIC", threads=int(sys.argv[1]))
    out[name] = [int(cut), hashlib.md5(part.tobytes()).hexdigest()]
print(json.dumps(out))
"""


def test_mtkahypar_deterministic_start_is_the_same_at_any_thread_count():
    """The default's Mt-KaHyPar start runs DETERMINISTIC on all cores: its partition must not
    depend on the count (1, 2 and 4 threads, each in its own process; 4 on a 2-core machine too)."""
    pytest.importorskip("mtkahypar")
    got = []
    for threads in (1, 2, 4):
        out = subprocess.run([sys.executable, "-c", _MTK_CHILD, str(threads)], capture_output=True, text=True,
                             timeout=300, check=True)
        got.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert got[0] == got[1] == got[2]
