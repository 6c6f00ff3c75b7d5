"""``partplan shares``: shares written from a .pt Data and from a chunked graph + data file hold the
user's rows (checked against the Data itself); bad input is one line, exit 2, the plan unchanged."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from partplan.cli.main import main  # noqa: E402


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture()
def pt(tmp_path):
    from torch_geometric.data import Data
    g = torch.Generator().manual_seed(4)
    n = 60
    ei = torch.randint(0, n, (2, 400), generator=g)
    d = Data(edge_index=ei, num_nodes=n, x=torch.randn(n, 3, generator=g), y=torch.randint(0, 2, (n,), generator=g),
             train_mask=torch.rand(n, generator=g) < 0.5, edge_attr=torch.randn(400, 4, generator=g))
    torch.save(d, tmp_path / "d.pt")
    return d, tmp_path / "d.pt"


def test_shares_from_a_pt_data(pt, tmp_path, capsys):
    from partplan.nn import LocalHalo
    d, f = pt
    plan = tmp_path / "d.plan"
    assert _run(capsys, "partition", f, "-k", "3", "-o", plan, "-q")[0] == 0
    rc, out, err = _run(capsys, "shares", plan, "--data", f, "--json")
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["node_fields"] == ["train_mask", "x", "y"] and rep["edge_fields"] == ["edge_attr"]
    op = LocalHalo(plan)
    for v, sh in zip(op.ranks, op.shares):
        assert torch.equal(sh["node"]["x"], d.x[torch.from_numpy(v.local_ids)])
        assert torch.equal(sh["edge"]["edge_attr"], d.edge_attr[v.edge_ids])


def test_bad_input_is_one_line_and_the_plan_is_kept(pt, tmp_path, capsys):
    from torch_geometric.data import Data
    d, f = pt
    plan = tmp_path / "d.plan"
    assert _run(capsys, "partition", f, "-k", "2", "-o", plan, "-q")[0] == 0
    before = (plan / "manifest.json").read_bytes()
    other = tmp_path / "other.pt"
    torch.save(Data(edge_index=torch.randint(0, 60, (2, 400)), num_nodes=60, x=torch.randn(60, 3)), other)
    cases = [("--data", tmp_path / "missing.pt"), ("--data", other), ("--graph", tmp_path)]
    for flag, val in cases:
        rc, out, err = _run(capsys, "shares", plan, flag, val)
        assert rc == 2 and err.count("\n") == 1 and err.startswith("partplan: error:"), (flag, val, err)
        assert (plan / "manifest.json").read_bytes() == before
    rc, _, err = _run(capsys, "shares", tmp_path / "nope.plan", "--data", f)
    assert rc == 2 and "nope.plan" in err


def test_shares_from_a_chunked_graph(tmp_path, capsys):
    import partplan
    from partplan.nn import LocalHalo
    from partplan.nn.data import write_data
    g = partplan.datasets.load("polblogs")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((g.n, 2)).astype(np.float32)
    split = rng.integers(0, 3, g.n)
    write_data(tmp_path / "d.npz", x, rng.integers(0, 2, g.n), split == 0, split == 1, split == 2)
    partplan.io.chunked.write_chunked(g, tmp_path / "g.chunked", chunks=4)
    plan = tmp_path / "g.plan"
    partplan.write_plan(partplan.build_plan(g, partplan.partition(g, 2, seed=0)), plan)
    rc, out, err = _run(capsys, "shares", plan, "--graph", tmp_path / "g.chunked", "--node-data", tmp_path / "d.npz")
    assert rc == 0, err
    op = LocalHalo(plan)
    for v, sh in zip(op.ranks, op.shares):
        assert np.array_equal(sh["node"]["x"].numpy(), x[v.local_ids])


def test_shares_from_a_chunked_graph_of_another_graph_are_refused(tmp_path, capsys):
    """Chunks with the plan's vertex count but a third of its edges dropped wrote shares missing
    those edges (and validate said valid): refused by the plan's source fingerprint."""
    import partplan
    g = partplan.datasets.load("polblogs")
    a = g.to_scipy().tocoo()
    keep = np.arange(a.nnz) % 3 != 0
    sub = partplan.Graph.from_edges(a.row[keep], a.col[keep], n=g.n, name="sub")
    assert sub.n == g.n and sub.nnz < g.nnz
    from partplan.io.chunked import write_chunked
    write_chunked(sub, tmp_path / "sub.chunked", chunks=3)
    plan = tmp_path / "g.plan"
    partplan.write_plan(partplan.build_plan(g, np.arange(g.n) % 2), plan)
    rc, _, err = _run(capsys, "shares", plan, "--graph", tmp_path / "sub.chunked")
    assert rc == 2 and "is not the graph of plan" in err and not list(plan.glob("share-*"))
    # the plan's own graph with a damaged chunk: the chunk and what is wrong in it, not "another graph"
    write_chunked(g, tmp_path / "bad.chunked", chunks=3)
    idx = tmp_path / "bad.chunked" / "chunk-00001.indices.npy"
    cols = np.load(idx)
    cols[0] = g.n + 7
    np.save(idx, cols)
    rc, _, err = _run(capsys, "shares", plan, "--graph", tmp_path / "bad.chunked")
    from tests.errlines import one_line
    one_line(rc, err, 2, "chunk-00001.indices.npy", f"column id {g.n + 7}", "out of range")


def test_validate_checks_the_shares(pt, tmp_path, capsys):
    d, f = pt
    plan = tmp_path / "d.plan"
    assert _run(capsys, "partition", f, "-k", "2", "-o", plan, "-q")[0] == 0
    assert _run(capsys, "shares", plan, "--data", f)[0] == 0
    rc, out, _ = _run(capsys, "validate", plan, "--json")
    assert rc == 0 and [c for c in json.loads(out)["checks"] if c["name"] == "shares"][0]["ok"]
    (plan / "share-00001.arrow").write_bytes(b"not a share")
    rc, out, _ = _run(capsys, "validate", plan, "--json")
    check = [c for c in json.loads(out)["checks"] if c["name"] == "shares"][0]
    assert rc == 1 and not check["ok"] and "share-00001" in check["detail"]


def test_inspect_checks_the_shares_it_lists(pt, tmp_path, capsys):
    """`inspect` checks every share the manifest lists as it checks the shards: present, its recorded
    size, its entry naming the rank's own file (checksums: validate)."""
    import shutil

    from tests.errlines import one_line
    d, f = pt
    plan = tmp_path / "d.plan"
    assert _run(capsys, "partition", f, "-k", "2", "-o", plan, "-q")[0] == 0
    assert _run(capsys, "shares", plan, "--data", f)[0] == 0
    rc, out, err = _run(capsys, "inspect", plan)
    assert rc == 0 and "shares      2 files" in out, err
    gone = tmp_path / "gone.plan"
    shutil.copytree(plan, gone)
    (gone / "share-00001.arrow").unlink()
    one_line(*_run(capsys, "inspect", gone)[::2], 2, "share-00001.arrow")
    cut = tmp_path / "cut.plan"
    shutil.copytree(plan, cut)
    (cut / "share-00000.arrow").write_bytes((cut / "share-00000.arrow").read_bytes()[:-5])
    one_line(*_run(capsys, "inspect", cut)[::2], 2, "share-00000.arrow", "truncated")
    named = tmp_path / "named.plan"
    shutil.copytree(plan, named)
    m = json.loads((named / "manifest.json").read_text())
    m["shares"]["files"][0]["file"] = "../x.arrow"
    (named / "manifest.json").write_text(json.dumps(m))
    one_line(*_run(capsys, "inspect", named)[::2], 2, "shares.files[0]")


def test_a_plan_written_over_one_with_shares_says_they_are_not_kept(pt, tmp_path, capsys):
    """`plan` or `partition` (without --shares) over a plan holding shares replaces it without them:
    said once as a warning; `partition --shares` writes new ones and says nothing."""
    d, f = pt
    plan = tmp_path / "d.plan"
    assert _run(capsys, "partition", f, "-k", "2", "-o", plan, "-q", "--shares")[0] == 0
    for argv in (["plan", f, "--partition", plan, "-o", plan, "-q"], ["partition", f, "-k", "2", "-o", plan, "-q"]):
        rc, _, err = _run(capsys, *argv)
        assert rc == 0 and err.count("held shares of the plan it replaced") == 1, err
        assert not list(plan.glob("share-*"))
        assert _run(capsys, "partition", f, "-k", "2", "-o", plan, "-q", "--shares")[0] == 0
    rc, _, err = _run(capsys, "partition", f, "-k", "2", "-o", plan, "-q", "--shares")
    assert rc == 0 and "warning" not in err and len(list(plan.glob("share-*"))) == 2


def test_partition_writes_the_shares_with_the_plan(pt, tmp_path, capsys):
    from partplan.nn import LocalHalo
    d, f = pt
    plan = tmp_path / "d.plan"
    rc, _, err = _run(capsys, "partition", f, "-k", "2", "-o", plan, "--shares", "-q")
    assert rc == 0, err
    op = LocalHalo(plan)
    for v, sh in zip(op.ranks, op.shares):
        assert torch.equal(sh["node"]["y"], d.y[torch.from_numpy(v.local_ids)])
    for argv in (["partition", f, "-k", "2", "-o", tmp_path / "p.npy", "--shares"],
                 ["partition", f, "-k", "2", "-o", tmp_path / "q.plan", "--shares", "--layout", "2d:1x2"]):
        rc, _, err = _run(capsys, *argv)
        assert rc == 2 and "--shares" in err and err.count("\n") == 1, err


def _power_law_pt(tmp_path, width: int):
    """A Data whose in-degrees are skewed to a few hubs (Zipf): balancing nonzeros leaves rows uneven."""
    from torch_geometric.data import Data
    rng = np.random.default_rng(5)
    n = 400
    src = rng.integers(0, n, 3000)
    dst = np.minimum(rng.zipf(1.6, 3000) - 1, n - 1)
    d = Data(edge_index=torch.from_numpy(np.stack([src, dst])), num_nodes=n, x=torch.randn(n, width),
             edge_attr=torch.randn(3000, 2))
    torch.save(d, tmp_path / "p.pt")
    return d, tmp_path / "p.pt"


@pytest.mark.parametrize("balance", ["rows", "memory"])
def test_balance_rows_or_memory_bounds_what_a_rank_holds(tmp_path, capsys, balance):
    """``--balance rows`` bounds the rows of H per rank and ``--balance memory`` a PyG Data's bytes per
    vertex when it trains from shares — counted here from the Data: its 4,096-byte x row is 128 in-edges of
    24 + 8 bytes (source, target, edge id; the 2-float edge_attr row) — each within ⌊(1+ε)·⌈W/k⌉⌋; the
    default (nonzeros) leaves both uneven on this graph."""
    d, f = _power_law_pt(tmp_path, width=1024)
    k, n = 8, d.num_nodes
    ei = d.edge_index.numpy()
    want = {"rows": np.ones(n, np.int64), "memory": np.bincount(ei[1], minlength=n) + 128}[balance]
    limit = int(np.floor(1.03 * -(-int(want.sum()) // k)))
    rc, out, err = _run(capsys, "partition", f, "-k", k, "-o", tmp_path / "b.part.8", "-q", "--balance", balance)
    assert rc == 0, err
    part = np.loadtxt(tmp_path / "b.part.8", dtype=np.int64)
    assert np.bincount(part, weights=want, minlength=k).max() <= limit
    rc, _, err = _run(capsys, "partition", f, "-k", k, "-o", tmp_path / "n.part.8", "-q")
    assert rc == 0, err
    plain = np.loadtxt(tmp_path / "n.part.8", dtype=np.int64)
    assert np.bincount(plain, weights=want, minlength=k).max() > limit      # the case: nnz alone does not


def _weighted_ring(tmp_path):
    from partplan.graph import Graph
    from partplan.io.metis import write_metis
    ring = Graph.from_edges(np.arange(40), (np.arange(40) + 1) % 40, n=40, symmetrize=True)
    vw = np.ones(40, np.int64)
    vw[:20] = 10
    write_metis(Graph(ring.indptr, ring.indices, vertex_weights=vw), tmp_path / "r.graph")
    return tmp_path / "r.graph", vw


@pytest.mark.dist
def test_balance_nnz_lets_nprocs_take_a_weighted_file(tmp_path, capsys):
    """The distributed partitioner refuses vertex weights it cannot keep; ``--balance nnz`` sets a
    file's aside (it was accepted and then refused), and the parts keep the nonzeros' limit."""
    f, _ = _weighted_ring(tmp_path)
    rc, _, err = _run(capsys, "partition", f, "-k", 4, "-o", tmp_path / "p.npy", "-q", "--balance", "nnz",
                      "--nprocs", 2)
    assert rc == 0, err
    assert np.bincount(np.load(tmp_path / "p.npy"), minlength=4).max() * 2 <= int(np.floor(1.03 * 20))


def test_balance_nnz_drops_a_files_vertex_weights_and_bad_uses_are_one_line(tmp_path, capsys):
    """A METIS file whose first 20 rows of a ring weigh 10 each: balanced by those weights, the 40
    heavy rows' weight (200 of 220) needs all 4 parts; ``--balance nnz`` (2 per row) sets them aside,
    so a part may hold 10 heavy rows (weight 100, far above the weights' limit 56). Each limit
    recounted here."""
    from tests.errlines import one_line
    _, vw = _weighted_ring(tmp_path)
    wlimit = int(np.floor(1.03 * -(-int(vw.sum()) // 4)))
    nlimit = int(np.floor(1.03 * -(-80 // 4)))
    heavy = {}
    for how in ("file", "nnz"):
        rc, _, err = _run(capsys, "partition", tmp_path / "r.graph", "-k", 4, "-o", tmp_path / f"{how}.part.4", "-q",
                          *(["--balance", how] if how == "nnz" else []))
        assert rc == 0, err
        part = np.loadtxt(tmp_path / f"{how}.part.4", dtype=np.int64)
        heavy[how] = int(np.bincount(part, weights=vw, minlength=4).max())
        assert np.bincount(part, minlength=4).max() * 2 <= nlimit or how == "file"
    assert heavy["file"] <= wlimit < heavy["nnz"]
    rc, _, err = _run(capsys, "partition", tmp_path / "r.graph", "-k", 4, "-o", tmp_path / "m.part.4", "--balance",
                      "memory")
    one_line(rc, err, 2, "--balance memory", ".pt")
    assert not (tmp_path / "m.part.4").exists()
    rc, _, err = _run(capsys, "partition", tmp_path / "r.graph", "-k", 4, "-o", tmp_path / "x.npy", "--balance",
                      "rows", "--nprocs", 2)
    one_line(rc, err, 2, "--balance rows", "--nprocs")
