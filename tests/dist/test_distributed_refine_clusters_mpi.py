"""The distributed refinement's coordinated moves under ``mpirun -np 2``: each process
holds half the rows of a grid with a bad (toothed) partition; whole-cluster moves lower
the maximum below where the single moves stop, the pulls (in the phases, the default,
and in every round) run, and send / recv / part weights equal a brute-force count of
the column-net volumes."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gridparts import brute_volumes, grid, toothed

_WORKER = textwrap.dedent("""
    import json, sys
    import numpy as np
    from mpi4py import MPI
    from partplan.partition.context import DistributedRefineContext
    from partplan.partition.refinement.distributed import RowSlice, refine_distributed

    src, out, knobs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    d = np.load(src)
    ip, ix, part, k = d["indptr"], d["indices"], d["part"].astype(np.int32), int(d["k"])
    comm = MPI.COMM_WORLD
    n = ip.size - 1
    lo, hi = comm.rank * n // comm.size, (comm.rank + 1) * n // comm.size
    rp = (ip[lo:hi + 1] - ip[lo]).astype(np.int64)
    ri = ix[ip[lo]:ip[hi]].astype(np.int64)
    sl = RowSlice(lo, hi, n, rp, ri, rp, ri)   # a symmetric pattern: the columns are the rows
    res = refine_distributed(comm, sl, part, k, 0.03, DistributedRefineContext(**knobs))
    if comm.rank == 0:
        np.save(out, part)
        with open(out + ".json", "w") as f:
            json.dump({"send": res.send.tolist(), "recv": res.recv.tolist(), "weights": res.weights.tolist(),
                       "cluster_moved": res.cluster_moved, "rounds": res.rounds}, f)
""")


@pytest.mark.dist
def test_cluster_phases_on_two_processes_lower_the_max_and_stay_exact(tmp_path):
    pytest.importorskip("mpi4py")
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed (make mpi)")
    from partplan.partition.pipeline.distributed import _env, mpirun_command
    nx, k = 48, 4
    a = grid(nx)
    start = toothed(nx, k, 4)
    np.savez(tmp_path / "g.npz", indptr=a.indptr.astype(np.int64), indices=a.indices.astype(np.int64),
             part=start, k=k)
    (tmp_path / "w.py").write_text(_WORKER)
    got = {}
    for label, knobs in (("single", {"coordinated_phases": 0}), ("clusters", {"pulls": 0, "cluster_levels": 8}),
                         ("default", {}), ("pulls", {"pulls": 1})):
        out = str(tmp_path / f"{label}.npy")
        subprocess.run(mpirun_command(2) + [sys.executable, str(tmp_path / "w.py"), str(tmp_path / "g.npz"), out,
                                            json.dumps(knobs)], check=True, timeout=300, capture_output=True, env=_env())
        part = np.load(out).astype(np.int64)
        meta = json.loads((tmp_path / f"{label}.npy.json").read_text())
        send, recv, weights = (x.tolist() for x in brute_volumes(a, part, k))
        assert (meta["send"], meta["recv"], meta["weights"]) == (send, recv, weights), label
        assert max(weights) <= int(np.floor(1.03 * -(-sum(weights) // k)))
        got[label] = (max(max(send), max(recv)), meta["cluster_moved"])
    assert got["single"][1] == 0 and got["clusters"][1] > 0 and got["default"][1] == 0
    assert got["clusters"][0] < got["single"][0], got
