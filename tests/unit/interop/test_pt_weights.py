"""A ``.pt`` PyG Data is read the same way by the CLI and the Python API (issue
#50): edge weights only when named (``--weight FIELD`` / ``weight=``), the
plan's ``source_fingerprint`` depends on the weights used, and a multi-column
``edge_attr`` (GATConv's normal case) is carried, never refused, unless named
as the weight field. Oracles: torch_geometric's own ``gcn_norm`` and scipy
matrices built here from ``edge_index``. The CLI runs in-process (cli.main)."""
import json

import numpy as np
import pytest
import scipy.sparse as sp

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")
from torch_geometric.data import Data
from torch_geometric.nn.conv.gcn_conv import gcn_norm

import partplan
from partplan.cli.main import main
from partplan.io import read_graph
from partplan.runtime.validate import _rebuild

N = 30


def _data(edge_attr_cols: int | None = None, seed: int = 0, with_weight: bool = False) -> Data:
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, N, (2, 120), generator=g)
    ei = torch.cat([ei, ei[:, :10], torch.tensor([[2, 2, 9], [2, 2, 9]])], dim=1)  # multi-edges, loops
    E = ei.size(1)
    d = Data(edge_index=ei, num_nodes=N, x=torch.randn(N, 4, generator=g))
    if edge_attr_cols is not None:
        shape = (E,) if edge_attr_cols == 0 else (E, edge_attr_cols)
        d.edge_attr = torch.rand(shape, generator=g) + 0.5
    if with_weight:
        d.edge_weight = torch.rand(E, generator=g) + 0.5
    return d


def _dense(ei: torch.Tensor, w: torch.Tensor | None, n: int) -> np.ndarray:
    """A[target, source] summed over the edges (PyG's scatter-add), by scipy."""
    e = ei.numpy()
    v = np.ones(e.shape[1]) if w is None else w.double().numpy().reshape(-1)
    return sp.coo_matrix((v, (e[1], e[0])), shape=(n, n)).toarray()


def _gcn_oracle(d: Data, w: torch.Tensor | None) -> np.ndarray:
    ei, ew = gcn_norm(d.edge_index, None if w is None else w.double(), N, add_self_loops=True,
                      dtype=torch.float64)
    return _dense(ei, ew, N)


def _plan_matrix(path) -> np.ndarray:
    A, _, _ = _rebuild(partplan.load_plan(path))
    return A.toarray()


def _cli(*args) -> int:
    return main([str(a) for a in args])


@pytest.mark.parametrize("field", ["edge_attr", "edge_weight"])
def test_read_pt_reads_weights_only_when_named(tmp_path, field):
    d = _data(edge_attr_cols=0, with_weight=True)
    torch.save(d, tmp_path / "d.pt")
    plain = read_graph(tmp_path / "d.pt")
    assert np.allclose(plain.to_scipy().toarray(), _dense(d.edge_index, None, N))   # multiplicity, no weights
    named = read_graph(tmp_path / "d.pt", weight=field)
    assert np.allclose(named.to_scipy().toarray(), _dense(d.edge_index, d[field], N))
    assert plain.fingerprint == named.fingerprint                  # one pattern ...
    assert plain.matrix_fingerprint != named.matrix_fingerprint    # ... two matrices
    # the Python API reads the Data the same way
    assert partplan.from_pyg(d).matrix_fingerprint == plain.matrix_fingerprint
    assert partplan.from_pyg(d, weight=field).matrix_fingerprint == named.matrix_fingerprint


def test_matrix_fingerprint_is_the_pattern_for_unit_values():
    g = partplan.Graph.from_edges([0, 1, 2], [1, 2, 0], n=3)
    ones = partplan.Graph.from_edges([0, 1, 2], [1, 2, 0], np.ones(3), n=3)
    twos = partplan.Graph.from_edges([0, 1, 2], [1, 2, 0], np.array([1.0, 2.0, 1.0]), n=3)
    assert g.matrix_fingerprint == g.fingerprint == ones.matrix_fingerprint
    assert twos.fingerprint == g.fingerprint and twos.matrix_fingerprint != g.matrix_fingerprint


@pytest.mark.parametrize("normalize", ["gcn", "none"])
def test_cli_and_plan_from_pyg_build_the_same_matrix(tmp_path, capsys, normalize):
    """`partplan partition data.pt` and plan_from_pyg: same matrix, same source
    fingerprint; weighted and unweighted differ, and the values are PyG's."""
    d = _data(edge_attr_cols=0)
    torch.save(d, tmp_path / "d.pt")
    norm = None if normalize == "none" else normalize
    fps = {}
    for weight in (None, "edge_attr"):
        out = tmp_path / f"cli_{weight}.plan"
        extra = [] if weight is None else ["--weight", weight]
        assert _cli("partition", tmp_path / "d.pt", "-k", 2, "--engine", "block", "--normalize", normalize,
                    "-o", out, "-q", *extra) == 0
        py = tmp_path / f"py_{weight}.plan"
        partplan.plan_from_pyg(d, 2, normalize=norm, weight=weight, model="baseline", out=py, progress=False)
        m_cli, m_py = (json.loads((p / "manifest.json").read_text())["graph"] for p in (out, py))
        assert m_cli["source_fingerprint"] == m_py["source_fingerprint"]
        w = None if weight is None else d.edge_attr
        want = _gcn_oracle(d, w) if norm else _dense(d.edge_index, w, N)
        assert np.allclose(_plan_matrix(out), want) and np.allclose(_plan_matrix(py), want)
        fps[weight] = m_cli["source_fingerprint"]
    assert fps[None] != fps["edge_attr"]


def test_multi_column_edge_attr_is_carried_not_refused(tmp_path, capsys):
    d = _data(edge_attr_cols=3)
    torch.save(d, tmp_path / "d.pt")
    out = tmp_path / "g.plan"
    assert _cli("partition", tmp_path / "d.pt", "-k", 2, "--engine", "block", "-o", out, "-q") == 0
    assert np.allclose(_plan_matrix(out), _dense(d.edge_index, None, N))
    capsys.readouterr()
    assert _cli("analyze", tmp_path / "d.pt", "-k", 2, "--method", "block", "--json") == 0
    assert json.loads(capsys.readouterr().out)["nnz"] == int(np.count_nonzero(_dense(d.edge_index, None, N)))
    exp = tmp_path / "pyg"
    assert _cli("export", out, "--to", "pyg", exp, "--graph", tmp_path / "d.pt", "-q") == 0
    rows = torch.cat([torch.load(exp / f"part_{r}" / "edge_feats.pt")["feats"]["edge_attr"] for r in range(2)])
    assert rows.shape == (d.edge_index.size(1), 3)                     # every row carried, every column
    capsys.readouterr()
    # named as the weight field, it is refused: one line naming the file and the field, exit 2
    for cmd in (["partition", tmp_path / "d.pt", "-k", 2, "-o", tmp_path / "w.plan"],
                ["analyze", tmp_path / "d.pt", "-k", 2, "--method", "block"],
                ["export", out, "--to", "pyg", tmp_path / "w", "--graph", tmp_path / "d.pt"]):
        assert _cli(*cmd, "--weight", "edge_attr") == 2
        text = capsys.readouterr().err
        err = [line for line in text.splitlines() if "error:" in line]
        assert len(err) == 1 and err[0].startswith("partplan: error: ") and "Traceback" not in text
        assert "d.pt" in err[0] and "edge_attr" in err[0]


def test_weight_option_errors(tmp_path, capsys):
    d = _data(edge_attr_cols=0)
    torch.save(d, tmp_path / "d.pt")
    torch.save(d.edge_index, tmp_path / "ei.pt")
    partplan.io.write_graph(partplan.from_pyg(d), tmp_path / "g.mtx")
    cases = [(["partition", tmp_path / "d.pt", "-k", 2, "--weight", "nope"], "nope"),
             (["partition", tmp_path / "g.mtx", "-k", 2, "--weight", "edge_attr"], "--weight"),
             (["analyze", tmp_path / "ei.pt", "-k", 2, "--method", "block", "--weight", "edge_attr"], "ei.pt")]
    for args, word in cases:
        assert _cli(*args) == 2
        text = capsys.readouterr().err
        err = [line for line in text.splitlines() if "error:" in line]
        assert len(err) == 1 and err[0].startswith("partplan: error: ") and word in err[0], text
        assert "Traceback" not in text


def test_weighted_plan_is_checked_against_the_weights(tmp_path, capsys):
    """validate / export with --graph D.pt read it as the plan was built."""
    d = _data(edge_attr_cols=0)
    torch.save(d, tmp_path / "d.pt")
    out = tmp_path / "w.plan"
    assert _cli("partition", tmp_path / "d.pt", "-k", 2, "--engine", "block", "--normalize", "gcn",
                "--weight", "edge_attr", "-o", out, "-q") == 0
    assert _cli("validate", out, "--graph", tmp_path / "d.pt", "--weight", "edge_attr") == 0
    assert _cli("export", out, "--to", "pyg", tmp_path / "e1", "--graph", tmp_path / "d.pt",
                "--weight", "edge_attr") == 0
    capsys.readouterr()
    assert _cli("export", out, "--to", "pyg", tmp_path / "e2", "--graph", tmp_path / "d.pt") == 2
    err = capsys.readouterr().err
    assert "not the graph of this plan" in err and "--weight" in err


def test_plan_from_pyg_takes_the_memory_balance_the_cli_names():
    """``--balance memory`` in the CLI; ``plan_from_pyg(balance="memory")`` was an OptionError. Its
    part weights, counted here from the Data (in-degree + the 4,096-byte x row in 24-byte in-edges,
    171), keep ⌊(1+ε)·⌈W/k⌉⌋, where the default (nonzeros) does not."""
    import numpy as np
    import torch
    from torch_geometric.data import Data

    from partplan.interop.pyg import plan_from_pyg
    rng = np.random.default_rng(5)
    src = rng.integers(0, 400, 3000)
    dst = np.minimum(rng.zipf(1.6, 3000) - 1, 399)
    d = Data(edge_index=torch.from_numpy(np.stack([src, dst])), num_nodes=400, x=torch.randn(400, 1024))
    w = np.bincount(dst, minlength=400) + 171
    limit = int(np.floor(1.03 * -(-int(w.sum()) // 8)))
    heaviest = {b: int(np.bincount(plan_from_pyg(d, 8, balance=b).part, weights=w, minlength=8).max())
                for b in ("memory", "nnz")}
    assert heaviest["memory"] <= limit < heaviest["nnz"]
