"""Distributed 1D plan build (the plan-build job, partplan/jobs/build.py over
partplan/plan/distbuild.py): the plan written by N gloo processes, each
reading only its chunks, must be byte-identical to the single-process
build_plan + write_plan (created=False), on the golden plans' graphs,
email-Enron, R-MAT 12 and R-MAT 18, at k = 2, 4 and 8 plan ranks with N = k
processes (p = 2 and 4) and N < k (each process builds several ranks: k = 4 /
N = 2, k = 8 / N = 3, and N = 1 in-process through a one-rank LocalComm)."""
from __future__ import annotations

import filecmp
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

from partplan.errors import PlanError
from partplan.io.chunked import write_chunked
from partplan.plan import build_plan, load_plan, write_plan

pytest.importorskip("torch")
from partplan.jobs.build import build_distributed, build_plan_distributed  # noqa: E402
from partplan.runtime.comm import LocalComm  # noqa: E402


def SelfComm():
    """The comm of one process that builds every rank."""
    return LocalComm(1, [])


def launch_local(gp, part, k, out, **kw):
    return build_distributed(gp, part, k, out, **kw)

ROOT = Path(__file__).resolve().parents[2] / "plans"
spec = importlib.util.spec_from_file_location("make_golden", ROOT / "make_golden.py")
make_golden = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_golden)


def _graphs():
    c = make_golden.cases()
    return {"path4": c["path4-1d-k2"][0], "directed8": c["directed8-1d-k3"][0], "grid4x4": c["grid4x4-1.5d-b2c2"][0]}


def _assert_same_dir(a: Path, b: Path):
    fa, fb = sorted(os.listdir(a)), sorted(os.listdir(b))
    assert fa == fb
    bad = [f for f in fa if not filecmp.cmp(a / f, b / f, shallow=False)]
    assert not bad, f"files differ: {bad}"


def _dist(gp, part, k, nprocs, out, **kw):
    """The distributed build with nprocs processes (N = 1: in this process
    through a one-rank LocalComm, no torch start-up); checks the per-process report."""
    if nprocs == 1:
        res = build_plan_distributed(gp, part, k, out, comm=SelfComm(), f=16, created=False, **kw)
        assert res["parts"] == [0, k] and res["per_rank"][0]["parts"] == [0, k]
    else:
        res = launch_local(gp, part, k, out, nprocs=nprocs, f=16, created=False, timeout_s=240, **kw)
    assert res["ranks"] == k and res["processes"] == nprocs and len(res["per_rank"]) == nprocs
    runs = [r["parts"] for r in res["per_rank"]]       # contiguous, non-empty runs covering 0..k-1
    assert runs[0][0] == 0 and runs[-1][1] == k and all(a < b for a, b in runs)
    assert all(runs[i][1] == runs[i + 1][0] for i in range(nprocs - 1))
    for r in res["per_rank"]:
        names = [s["stage"] for s in r["stages"]]
        assert names[:5] == ["read", "shuffle", "columns", "backward", "write"]
        assert all(s["peak_rss_bytes"] > 0 for s in r["stages"])
    json.dumps(res)
    return res


def _check(g, part, k, tmp_path, nprocs_list, chunks=3, gp=None, **kw):
    """One reference (build_plan + write_plan in this process), then the
    distributed build with each N in nprocs_list, compared byte for byte."""
    gp = gp or write_chunked(g, tmp_path / "g.chunked", chunks=chunks)
    ref = write_plan(build_plan(g, part, k, f=16, meta=kw.get("meta")), tmp_path / "ref.plan", created=False)
    out = []
    for nprocs in nprocs_list:
        res = _dist(gp, part, k, nprocs, tmp_path / f"dist{nprocs}.plan", **kw)
        _assert_same_dir(ref, Path(res["plan"]))
        out.append(res)
    return out


@pytest.mark.parametrize("k,nprocs", [(2, [2]), (4, [2]), (8, [3, 1])])
def test_golden_graphs_byte_identical(tmp_path, k, nprocs):
    """N = k, N < k (2 and 3 processes over 4 and 8 ranks) and N = 1 on the tiny golden graphs
    (more ranks than rows, empty ranks); N = k = 4 is email-Enron's and R-MAT 18's."""
    for name, g in _graphs().items():
        if g.n < k:
            continue
        part = np.arange(g.n) * 7 % k
        sub = tmp_path / name
        sub.mkdir()
        _check(g, part, k, sub, nprocs, chunks=2, meta={"model": "golden", "seed": 0})


def test_directed_several_parts_per_process_backward(tmp_path):
    """directed8 (A != A^T: a separate bwd program built from the transposed
    shuffle) with 3 parts on process 0 and an unbalanced partition."""
    g = _graphs()["directed8"]
    part = np.array([2, 2, 2, 2, 0, 1, 2, 0])
    _check(g, part, 3, tmp_path, [2, 1], chunks=3)


@pytest.mark.parametrize("k,nprocs", [(2, [2]), (4, [4, 2]), (8, [3, 1])])
def test_email_enron_byte_identical(tmp_path, k, nprocs):
    from partplan.datasets import load_graph
    g = load_graph("email-Enron")
    part = np.random.default_rng(k).integers(0, k, g.n)
    for res in _check(g, part, k, tmp_path, nprocs, chunks=5):
        assert res["total_volume"] == load_plan(tmp_path / "ref.plan").manifest["stats"]["total_volume"]


@pytest.mark.parametrize("k,nprocs", [(4, [2]), (8, [3, 1])])
def test_rmat12_chunked_generator_byte_identical(tmp_path, k, nprocs):
    from partplan.datasets.chunked_gen import rmat_chunked
    from partplan.datasets.generators import rmat
    gp = rmat_chunked(12, seed=1, path=tmp_path / "g.chunked", chunks=6)
    g = rmat(12, seed=1)
    part = (np.arange(g.n) // 3) % k                  # blocks of 3 over permuted labels
    _check(g, part, k, tmp_path, nprocs, gp=gp)


def test_rmat16_byte_identical_p4(tmp_path):
    """R-MAT 16 (65,536 rows, 1.8 M nonzeros) from the chunked generator, k = p = 4 processes,
    a random partition (p = 2 is email-Enron's and R-MAT 12's)."""
    from partplan.datasets.chunked_gen import rmat_chunked
    from partplan.datasets.generators import rmat
    gp = rmat_chunked(16, seed=0, path=tmp_path / "g.chunked", chunks=8)
    g = rmat(16, seed=0)
    part = np.random.default_rng(4).integers(0, 4, g.n)
    _check(g, part, 4, tmp_path, [4], gp=gp)


def test_directed_weighted_one_process_and_forced_backward(tmp_path):
    """One process (N = 1) and backward=True on a symmetric graph (separate bwd program)."""
    g = _graphs()["grid4x4"]
    gp = write_chunked(g, tmp_path / "g.chunked", chunks=3)
    ref = write_plan(build_plan(g, np.zeros(g.n, int), 1, f=16, backward=True), tmp_path / "ref.plan",
                     created=False)
    build_plan_distributed(gp, np.zeros(g.n, int), 1, tmp_path / "d.plan", comm=SelfComm(), f=16,
                           backward=True, created=False)
    _assert_same_dir(ref, tmp_path / "d.plan")


def _weighted_directed(scale: int, seed: int):
    """An R-MAT graph with its edges' directions scrambled and random weights."""
    from partplan import Graph
    from partplan.datasets.generators import rmat
    g = rmat(scale, 6, seed=seed)
    rng = np.random.default_rng(seed)
    return Graph.from_edges(g.rows, (g.indices * 7 + 3) % g.n, n=g.n,
                            weights=rng.integers(1, 9, g.nnz) / 4.0)


def _check_layout(g, layout, k, nprocs_list, tmp_path, seed=0, **kw):
    """build_plan + write_plan of ``layout`` against the distributed build with each N."""
    from partplan.layouts import parse_layout
    b = parse_layout(layout, k).row_blocks
    part = np.random.default_rng(seed).integers(0, b, g.n)
    gp = write_chunked(g, tmp_path / "g.chunked", chunks=3)
    ref = write_plan(build_plan(g, part, k, layout=layout, f=16, **kw), tmp_path / "ref.plan", created=False)
    for nprocs in nprocs_list:
        out = tmp_path / f"dist{nprocs}.plan"
        if nprocs == 1:
            res = build_plan_distributed(gp, part, k, out, comm=SelfComm(), layout=layout, f=16, created=False, **kw)
        else:
            res = launch_local(gp, part, k, out, nprocs=nprocs, layout=layout, f=16, created=False, timeout_s=240,
                               **kw)
        _assert_same_dir(ref, Path(res["plan"]))
        assert res["processes"] == nprocs and res["ranks"] == k
        runs = [r["parts"] for r in res["per_rank"]]     # contiguous runs of plan ranks covering 0..k-1
        assert runs[0][0] == 0 and runs[-1][1] == k and all(runs[i][1] == runs[i + 1][0] for i in range(nprocs - 1))
        stages = ["read", "lookup", "shuffle", "columns", "backward", "write"]
        if not parse_layout(layout, k).split_nonzeros:      # routed: the 1D stages (rows move)
            stages.remove("lookup")
        assert [s["stage"] for s in res["stages"]][:len(stages)] == stages
    return json.loads((tmp_path / "ref.plan" / "manifest.json").read_text())


@pytest.mark.parametrize("layout,k", [("1.5d:2", 4), ("1.5d:3", 6), ("1.5d:1", 3), ("2d:2x2", 4), ("2d:3x2", 6),
                                      ("2d:1x3", 3), ("2d:2x1", 2), ("routed:domain:2", 4), ("routed:source:2", 4),
                                      ("routed:domain:2,4", 8), ("routed:source:3", 6)])
def test_split_layouts_byte_identical_in_process(tmp_path, layout, k):
    """1.5D, 2D and routed (one and two domain levels) by one process (N = 1), on a symmetric golden graph
    (backward = forward) and a directed weighted R-MAT (separate backward program from A^T, values
    shuffled with their nonzeros)."""
    (tmp_path / "sym").mkdir()
    (tmp_path / "dir").mkdir()
    m = _check_layout(_graphs()["grid4x4"], layout, k, [1], tmp_path / "sym", seed=1)
    assert m["backward"] == "same-as-forward"
    m = _check_layout(_weighted_directed(8, 2), layout, k, [1], tmp_path / "dir", seed=2)
    assert m["backward"] == "separate" and m["layout"].startswith(layout.split(":")[0])


@pytest.mark.parametrize("layout,k,nprocs", [("1.5d:2", 4, 2), ("2d:2x2", 4, 2), ("1.5d:2", 8, 3), ("2d:2x4", 8, 3),
                                             ("routed:domain:2,4", 8, 3)])
def test_split_layouts_byte_identical_on_gloo(tmp_path, layout, k, nprocs):
    """1.5D and 2D at p = 4 by 2 gloo processes and at p = 8 by 3 (several row blocks per process),
    routed over two domain levels by 3: byte for byte the one-process plan of a directed weighted graph."""
    _check_layout(_weighted_directed(9, 3), layout, k, [nprocs], tmp_path, seed=3)


def test_refusals(tmp_path):
    g = _graphs()["grid4x4"]
    gp = write_chunked(g, tmp_path / "g.chunked", chunks=2)
    with pytest.raises(PlanError, match=r"3 processes for a plan of 2 row blocks.*processes <= row blocks"):
        launch_local(gp, np.zeros(g.n, int), 2, tmp_path / "x.plan", nprocs=3)   # before any start
    with pytest.raises(PlanError, match=r"3 processes for a plan of 2 row blocks \(4 ranks\)"):
        launch_local(gp, np.zeros(g.n, int), 4, tmp_path / "x.plan", nprocs=3, layout="1.5d:2")

    class TwoComm(LocalComm):          # a 2-process communicator seen from rank 0
        def __init__(self):
            super().__init__(1, [])
            self.world = 2

        def allgather_object(self, obj):
            return [obj, obj]
    with pytest.raises(PlanError, match=r"2 processes for 1 row blocks"):
        build_plan_distributed(gp, np.zeros(g.n, int), 1, tmp_path / "x.plan", comm=TwoComm())
    with pytest.raises(PlanError, match="part id 5 >= k=1"):
        build_plan_distributed(gp, np.full(g.n, 5), 1, tmp_path / "x.plan", comm=SelfComm())
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "mine.txt").write_text("x")
    with pytest.raises(PlanError, match="not a plan directory"):
        build_plan_distributed(gp, np.zeros(g.n, int), 1, tmp_path / "foreign", comm=SelfComm())
    assert not (tmp_path / "x.plan").exists()


def test_bad_partition_stops_every_rank(tmp_path):
    """One rank's slice is bad: all ranks agree and stop with one error (no hang)."""
    g = _graphs()["grid4x4"]
    gp = write_chunked(g, tmp_path / "g.chunked", chunks=2)
    part = np.zeros(g.n, int)
    part[-1] = 9
    with pytest.raises(PlanError, match="rank 1: .*vertex 15 has part id 9"):
        launch_local(gp, part, 2, tmp_path / "x.plan", timeout_s=120)
    assert not (tmp_path / "x.plan").exists()


def test_dead_process_ends_the_build_with_one_error(tmp_path, monkeypatch):
    """Process 1 is SIGKILLed at its 3rd exchange (tests/faults/sitecustomize.py):
    the build ends with an error naming it, within the timeout, and writes no plan."""
    import time
    g = _graphs()["grid4x4"]
    gp = write_chunked(g, tmp_path / "g.chunked", chunks=2)
    faults = Path(__file__).resolve().parents[1] / "faults"
    rest = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(faults)] + rest))
    monkeypatch.setenv("KILL_AT_EXCHANGE", "1:3:exchange_rows")
    t0 = time.monotonic()
    with pytest.raises(PlanError, match="distributed plan build failed: .*rank 1: killed by signal SIGKILL"):
        launch_local(gp, np.arange(g.n) % 2, 2, tmp_path / "x.plan", timeout_s=20)
    assert time.monotonic() - t0 < 20 + 90
    assert not (tmp_path / "x.plan").exists() and not list(tmp_path.glob(".x.plan*"))


def test_cli_chunked_convert_generate_and_plan_nprocs(tmp_path, monkeypatch, capsys):
    """The CLI wiring: `convert --chunks`, `datasets generate rmat --chunks` and
    `plan --nprocs` give the plan `plan` builds in one process, byte for byte
    (created aside), and refuse what the distributed build does not offer. The commands run
    in this process (`plan --nprocs 2` starts its 2 workers from here)."""
    from types import SimpleNamespace

    from partplan.cli.main import main
    from partplan.datasets import rmat

    def cli(*a):
        rc = main([str(x) for x in a])
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=rc, stdout=out, stderr=err)
    monkeypatch.chdir(tmp_path)
    r = cli("datasets", "generate", "rmat", "--scale", 9, "--chunks", 3, "-o", "r9")
    assert r.returncode == 0, r.stderr
    r = cli("convert", "r9", "r9.npz")  # a chunked directory reads as a graph too
    assert r.returncode == 0, r.stderr
    from partplan.io import read_graph
    assert read_graph(tmp_path / "r9.npz").fingerprint == rmat(9).fingerprint
    r = cli("convert", "r9.npz", "r9c", "--chunks", 2)
    assert r.returncode == 0, r.stderr
    part = np.arange(rmat(9).n) % 3
    np.save(tmp_path / "p.npy", part)
    for out, extra in (("d.plan", ("--nprocs", 2)), ("s.plan", ())):   # 3 ranks from the partition, 2 processes
        r = cli("plan", "r9c", "--partition", "p.npy", "-o", out, *extra)
        assert r.returncode == 0, r.stderr
    for name in sorted(os.listdir(tmp_path / "s.plan")):
        if name != "manifest.json":
            assert filecmp.cmp(tmp_path / "s.plan" / name, tmp_path / "d.plan" / name, shallow=False), name
    ms, md = (json.loads((tmp_path / d / "manifest.json").read_text()) for d in ("s.plan", "d.plan"))
    ms.pop("created", None), md.pop("created", None)
    assert ms == md
    # a split layout: its ranks from the partition's 3 row blocks (1.5d:2 -> 6 ranks), as the one-process build
    r = cli("plan", "r9c", "--partition", "p.npy", "-o", "h.plan", "--layout", "1.5d:2", "--nprocs", 2)
    assert r.returncode == 0 and "layout 1.5d:2 on 6 ranks, built by 2 processes" in r.stderr, r.stderr
    ref = write_plan(build_plan(rmat(9), part, layout="1.5d:2", meta={"partition_file": "p.npy"}),
                     tmp_path / "h_ref.plan", created=False)
    mh = json.loads((tmp_path / "h.plan" / "manifest.json").read_text())
    mr = json.loads((ref / "manifest.json").read_text())
    mh.pop("created", None)
    for key in ("name", "directed"):                   # what the chunked copy records, not the generator
        mr["graph"][key] = mh["graph"][key]
    assert mh == mr and mh["ranks"] == 6
    for name in sorted(os.listdir(ref)):
        if name != "manifest.json":
            assert filecmp.cmp(ref / name, tmp_path / "h.plan" / name, shallow=False), name
    for args, msg in ((("r9.npz", "--nprocs", 2), "chunked graph directory"),
                      (("r9c", "--nprocs", 4), "--nprocs 4 exceeds the plan's row blocks (3 for layout 1d on 3 ranks)"),
                      (("r9c", "--nprocs", 5, "-k", 4), "--nprocs 5 exceeds the plan's row blocks (4 for layout 1d on 4 "
                                                        "ranks from -k)"),
                      (("r9c", "--nprocs", 4, "--layout", "1.5d:2"), "--nprocs 4 exceeds the plan's row blocks (3 for layout "
                                                                      "1.5d:2 on 6 ranks)")):
        r = cli("plan", *args[:1], "--partition", "p.npy", "-o", "x.plan", *args[1:])
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert not (tmp_path / "x.plan").exists()
