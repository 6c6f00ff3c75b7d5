"""Per-rank shares beside a 1D plan (partplan.nn.shares) and Halo built from them.

Oracles: the user's own Data indexed by the ids the plan gives (numpy), PyG's layers on the whole
graph in one process (GCNConv with PyG's own gcn_norm, GATConv with edge features, SAGEConv), a dense
numpy D^-1/2 (A + I) D^-1/2. Hostile shares (truncated, another rank's, another plan's, a field
that lies about its shape) are refused with a PlanError naming the file."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import xxhash

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import partplan  # noqa: E402
from partplan.errors import PlanError  # noqa: E402
from partplan.nn import LocalHalo  # noqa: E402


def _data(n=70, e=420, seed=5):
    from torch_geometric.data import Data
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    ei = torch.cat([ei, ei[:, :25], torch.tensor([[3, 3, 9], [3, 3, 9]])], 1)   # multi-edges, self loops
    E = ei.shape[1]
    return Data(edge_index=ei, num_nodes=n, x=torch.randn(n, 6, dtype=torch.float64, generator=g),
                y=torch.randint(0, 4, (n,), generator=g), train_mask=torch.rand(n, generator=g) < 0.4,
                test_mask=torch.rand(n, generator=g) < 0.3, h16=torch.randn(n, 2, generator=g).bfloat16(),
                pos=torch.randint(0, 9, (n, 3), dtype=torch.int32, generator=g),
                edge_attr=torch.randn(E, 3, dtype=torch.float64, generator=g))


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    data = _data()
    path = tmp_path_factory.mktemp("shares") / "g.plan"
    partplan.plan_from_pyg(data, 3, out=path, shares=True, seed=0)
    return data, path


def test_each_share_holds_its_ranks_rows_edges_and_fields(planned):
    data, path = planned
    op = LocalHalo(path)
    ei = data.edge_index.numpy()
    seen = []
    for v, sh in zip(op.ranks, op.shares):
        lid = v.local_ids
        for name in ("x", "y", "train_mask", "test_mask", "h16", "pos"):
            assert sh["node"][name].dtype == data[name].dtype
            assert torch.equal(sh["node"][name], data[name][torch.from_numpy(lid)]), name
        want = np.flatnonzero(np.isin(ei[1], lid))                 # every edge whose target is local
        assert np.array_equal(np.sort(v.edge_ids.numpy()), want)
        assert torch.equal(sh["edge"]["edge_attr"], data.edge_attr[v.edge_ids])
        rows = np.concatenate([lid, v.halo_ids])
        assert np.array_equal(rows[v.edge_index.numpy()], ei[:, v.edge_ids.numpy()])
        seen.append(lid)
    assert np.array_equal(np.sort(np.concatenate(seen)), np.arange(data.num_nodes))


def _whole(conv, data, **kw):
    return conv(data.x, data.edge_index, **kw)


@pytest.mark.parametrize("layer", ["gcn", "gcn_improved", "gcn_noloops", "gat", "sage"])
def test_layers_through_shares_equal_pyg_on_the_whole_graph(planned, layer):
    from torch_geometric.nn import GATConv, GCNConv, SAGEConv
    data, path = planned
    torch.manual_seed(0)
    conv = {"gcn": lambda: GCNConv(6, 4), "gcn_improved": lambda: GCNConv(6, 4, improved=True),
            "gcn_noloops": lambda: GCNConv(6, 4, add_self_loops=False),
            "gat": lambda: GATConv(6, 4, heads=2, edge_dim=3), "sage": lambda: SAGEConv(6, 4)}[layer]().double()
    kw = (lambda ea: {"edge_attr": ea}) if layer == "gat" else (lambda ea: {})
    ref = _whole(conv, data, **kw(data.edge_attr))
    ref.pow(2).sum().backward()
    want = [p.grad.clone() for p in conv.parameters()]
    conv.zero_grad()
    op = LocalHalo(path)
    xs = [sh["node"]["x"].clone().requires_grad_(True) for sh in op.shares]
    outs = op(xs)
    loss = 0
    for v, sh, o in zip(op.ranks, op.shares, outs):
        z = conv(o, v.edge_index, **kw(sh["edge"]["edge_attr"]))[:v.num_local]
        assert torch.allclose(z, ref[torch.from_numpy(v.local_ids)], rtol=0, atol=1e-12), layer
        loss = loss + z.pow(2).sum()
    loss.backward()
    for p, w in zip(conv.parameters(), want):
        assert torch.allclose(p.grad, w, rtol=1e-10, atol=1e-12)


def test_gcn_through_halo_from_an_edge_index_equals_dense_normalization(planned):
    """GCNConv through Halo(plan, edge_index): halo rows' degrees over the whole graph (no shares)."""
    from torch_geometric.nn import GCNConv
    data, path = planned
    n = data.num_nodes
    A = np.zeros((n, n))
    ei = data.edge_index.numpy()
    np.add.at(A, (ei[1], ei[0]), 1.0)
    np.fill_diagonal(A, 0)
    A += np.eye(n)                                           # add_remaining_self_loops: one loop each
    d = A.sum(1) ** -0.5
    torch.manual_seed(1)
    conv = GCNConv(6, 3, bias=False).double()
    ref = (d[:, None] * A * d[None, :]) @ (data.x.numpy() @ conv.lin.weight.detach().numpy().T)
    op = LocalHalo(path, data.edge_index)
    outs = op([data.x[torch.from_numpy(v.local_ids)] for v in op.ranks])
    for v, o in zip(op.ranks, outs):
        z = conv(o, v.edge_index)[:v.num_local].detach().numpy()
        assert np.allclose(z, ref[v.local_ids], rtol=0, atol=1e-12)


def test_gcn_norm_that_cannot_be_exact_is_refused_naming_distspmm(planned):
    from torch_geometric.nn import GCNConv, SGConv
    data, path = planned
    op = LocalHalo(path)
    v, o = op.ranks[0], op([sh["node"]["x"] for sh in op.shares])[0]
    with pytest.raises(PlanError, match="DistSpMM"):
        SGConv(6, 2, K=2).double()(o, v.edge_index)
    with pytest.raises(PlanError, match="DistSpMM"):
        GCNConv(6, 2).double()(o, v.edge_index, torch.ones(v.edge_index.shape[1], dtype=torch.float64))


def _resign(path: Path, rank: int, data: bytes) -> None:
    f = path / f"share-{rank:05d}.arrow"
    f.write_bytes(data)
    m = json.loads((path / "manifest.json").read_text())
    m["shares"]["files"][rank].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest(),
                                          xxh3_128=xxhash.xxh3_128_hexdigest(data))
    (path / "manifest.json").write_text(json.dumps(m))


def test_bad_shares_are_refused(planned, tmp_path):
    from partplan.nn.shares import read_share
    data, path = planned
    bad = tmp_path / "bad.plan"
    shutil.copytree(path, bad)
    f0 = bad / "share-00000.arrow"
    raw = f0.read_bytes()
    f0.write_bytes(raw[:-100])                                  # truncated
    with pytest.raises(PlanError, match="truncated"):
        LocalHalo(bad)
    f0.write_bytes(raw[:-8] + bytes(8))                          # same size, other bytes
    with pytest.raises(PlanError, match="share-00000.arrow: share of rank 0 is corrupted: xxh3_128"):
        LocalHalo(bad)
    _resign(bad, 0, (path / "share-00001.arrow").read_bytes())  # rank 1's share in rank 0's place
    with pytest.raises(PlanError, match="another rank"):
        LocalHalo(bad)
    other = tmp_path / "other.plan"                             # another graph of as many vertices
    partplan.plan_from_pyg(_data(seed=99), 3, out=other, shares=True, seed=0)
    _resign(bad, 0, (other / "share-00000.arrow").read_bytes())
    with pytest.raises(PlanError, match="another plan"):
        LocalHalo(bad)
    _resign(bad, 0, raw)
    LocalHalo(bad)                                              # its own share again: fine
    (bad / "share-00002.arrow").unlink()                        # rank 0 reads its own share only
    assert read_share(bad, 0)["local_ids"].size > 0
    with pytest.raises(PlanError, match="share of rank 2"):
        read_share(bad, 2)


def test_a_field_shape_whose_product_wraps_in_int64_is_refused(planned, tmp_path):
    """A share field's shape [L, 28, 7905747460161236407] multiplied in int64 wraps to the stored
    count, passed the size check and ended in a reshape traceback; it is one PlanError."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    data, path = planned
    bad = tmp_path / "wrap.plan"
    shutil.copytree(path, bad)
    t = ipc.open_file(pa.BufferReader((bad / "share-00000.arrow").read_bytes())).read_all()
    meta = dict(t.schema.metadata)
    md = json.loads(meta[b"partplan"])
    rows, width = md["fields"]["node/x"]["shape"]
    m = 2 ** 61 + 1                                  # c * d = width (mod 2^64), both below 2^63
    c, d = 2 * m, (width // 2) * pow(m, -1, 2 ** 63) % 2 ** 63
    assert width % 2 == 0 and (c * d) % 2 ** 64 == width and int(np.prod([rows, c, d])) == rows * width
    md["fields"]["node/x"]["shape"] = [rows, c, d]
    meta[b"partplan"] = json.dumps(md).encode()
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, t.schema.with_metadata(meta)) as w:
        w.write_table(t.replace_schema_metadata(meta))
    _resign(bad, 0, sink.getvalue().to_pybytes())
    with pytest.raises(PlanError, match="node/x"):
        LocalHalo(bad)


def _arrays_of(raw: bytes) -> dict:
    """{field: (offset, bytes)} of a share's arrays, found by pyarrow (the oracle for where they lie)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    buf = pa.py_buffer(raw)
    batch = ipc.open_file(buf).get_batch(0)
    return {name: (col.values.buffers()[1].address - buf.address, col.values.buffers()[1].size)
            for name, col in zip(batch.schema.names, batch.columns)}


def test_a_flipped_byte_anywhere_in_a_share_is_one_corruption_error(planned, tmp_path):
    """Every byte of the arrays' first and last 64, and of everything between the arrays (headers,
    offsets, footer), flipped one at a time: each refused as corrupted, naming the file and the field."""
    from partplan.nn.shares import read_share
    _, path = planned
    bad = tmp_path / "flip.plan"
    shutil.copytree(path, bad)
    f0 = bad / "share-00000.arrow"
    raw = f0.read_bytes()
    arrays = _arrays_of(raw)
    inside = np.zeros(len(raw), bool)
    probe = set()
    for off, size in arrays.values():
        inside[off:off + size] = True
        probe |= set(range(off, off + min(size, 64))) | set(range(max(off, off + size - 64), off + size))
    probe |= set(np.flatnonzero(~inside).tolist())
    assert len(probe) > 500 and probe & set(np.flatnonzero(inside).tolist())
    for i in sorted(probe):
        f0.write_bytes(raw[:i] + bytes([raw[i] ^ 0x10]) + raw[i + 1:])
        with pytest.raises(PlanError) as exc:
            read_share(bad, 0)
        msg = str(exc.value)
        assert "\n" not in msg and "share-00000.arrow: share of rank 0 is corrupted" in msg, (i, msg)
        assert "'shares.files[0].xxh3_128'" in msg
    f0.write_bytes(raw)
    assert read_share(bad, 0)["local_ids"].size > 0


def test_share_checksums_old_manifests_and_validate(planned, tmp_path):
    """A manifest entry without xxh3_128 (shares written before it) is read, its sha256 checked; a
    malformed xxh3_128 is refused naming the field; validate checks the sha256 even when the
    xxh3_128 agrees."""
    from partplan.nn.shares import read_share, validate_shares
    data, path = planned
    bad = tmp_path / "old.plan"
    shutil.copytree(path, bad)
    m = json.loads((bad / "manifest.json").read_text())
    raw = (bad / "share-00001.arrow").read_bytes()
    assert m["shares"]["files"][1]["xxh3_128"] == xxhash.xxh3_128_hexdigest(raw)
    assert m["shares"]["files"][1]["sha256"] == hashlib.sha256(raw).hexdigest()
    for e in m["shares"]["files"]:
        del e["xxh3_128"]
    (bad / "manifest.json").write_text(json.dumps(m))
    want = read_share(path, 1)
    got = read_share(bad, 1)
    assert np.array_equal(got["edge_index"], want["edge_index"]) and torch.equal(got["node"]["x"], want["node"]["x"])
    (bad / "share-00001.arrow").write_bytes(raw[:40] + bytes([raw[40] ^ 1]) + raw[41:])
    with pytest.raises(PlanError, match="share-00001.arrow: share of rank 1 is corrupted: sha256"):
        read_share(bad, 1)
    m["shares"]["files"][1]["xxh3_128"] = "not hex"
    (bad / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(PlanError, match=r"'shares.files\[1\]': field 'xxh3_128' = 'not hex' is not 32 hex"):
        read_share(bad, 1)
    # xxh3_128 re-signed, sha256 stale: the fast read accepts the bytes, validate does not
    at = _arrays_of(raw)["node/x"][0] + 5                       # a feature's bits: still a valid share
    flipped = raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1:]
    (bad / "share-00001.arrow").write_bytes(flipped)
    m["shares"]["files"][1]["xxh3_128"] = xxhash.xxh3_128_hexdigest(flipped)
    (bad / "manifest.json").write_text(json.dumps(m))
    read_share(bad, 1)
    problems = validate_shares(bad)
    assert len(problems) == 1 and "share-00001.arrow: share of rank 1 is corrupted: sha256" in problems[0]


def test_validate_checks_every_checksum_and_the_listed_share_fields(planned, tmp_path):
    """validate compared the sha256 alone: a manifest whose xxh3_128 was wrong passed it, though
    every reader refused that plan; the manifest's shares format, version and field list were not
    compared with the share files either."""
    from partplan.nn.shares import validate_shares
    _, path = planned
    bad = tmp_path / "xxh.plan"
    shutil.copytree(path, bad)
    m = json.loads((bad / "manifest.json").read_text())
    good = m["shares"]["files"][2]["xxh3_128"]
    m["shares"]["files"][2]["xxh3_128"] = good[:-1] + ("0" if good[-1] != "0" else "1")
    (bad / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(PlanError, match="xxh3_128"):
        LocalHalo(bad)
    problems = validate_shares(bad)
    assert len(problems) == 1 and "'shares.files[2].xxh3_128'" in problems[0] and good in problems[0]
    for edit, needle in ((("format",), "x"), (("version",), 2), (("fields", "node", "x", "dtype"), "float30"),
                         (("fields", "node", "x", "shape"), [9])):
        m = json.loads((path / "manifest.json").read_text())
        at = m["shares"]
        for key in edit[:-1]:
            at = at[key]
        at[edit[-1]] = needle
        (bad / "manifest.json").write_text(json.dumps(m))
        problems = validate_shares(bad)
        assert len(problems) >= 1 and f"shares.{edit[0]}" in problems[0], (edit, problems)


def test_a_plan_without_shares_says_how_to_write_them(tmp_path):
    data = _data(n=20, e=60)
    p = tmp_path / "g.plan"
    partplan.plan_from_pyg(data, 2, out=p)
    with pytest.raises(PlanError, match="shares=True"):
        LocalHalo(p)


def test_shares_of_another_graph_are_refused_and_the_plan_kept(planned, tmp_path):
    from partplan.nn.shares import write_shares
    data, path = planned
    p = tmp_path / "g.plan"
    shutil.copytree(path, p)
    before = (p / "manifest.json").read_bytes()
    other = _data(n=70, e=420, seed=99)
    with pytest.raises(PlanError):
        write_shares(p, other)
    assert (p / "manifest.json").read_bytes() == before
    assert sorted(x.name for x in p.iterdir()) == sorted(x.name for x in path.iterdir())


def test_shares_from_a_chunked_graph_and_a_data_file(tmp_path):
    """Rows = targets of the CSR; edge id = the nonzero's CSR position; node fields read by rows."""
    from partplan.io.chunked import write_chunked
    from partplan.nn.data import write_data
    from partplan.nn.shares import read_share, write_shares
    g = partplan.datasets.load("polblogs")
    n = g.n
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = rng.integers(0, 2, n)
    split = rng.integers(0, 3, n)
    masks = [split == i for i in range(3)]
    write_data(tmp_path / "d.npz", x, y, *masks)
    write_chunked(g, tmp_path / "g.chunked", chunks=3)
    plan = tmp_path / "g.plan"
    partplan.write_plan(partplan.build_plan(g, partplan.partition(g, 3, seed=0)), plan)
    write_shares(plan, graph=tmp_path / "g.chunked", features=tmp_path / "d.npz")
    indptr, indices = np.asarray(g.indptr), np.asarray(g.indices)
    rows_of = np.repeat(np.arange(n), np.diff(indptr))
    from partplan.nn.rows import RankRows, exchange_step
    from partplan.plan.store import load_rank, read_manifest
    m = read_manifest(plan)
    for r in range(3):
        v = RankRows("p", m, load_rank(plan, r, manifest=m), exchange_step("p", m))
        sh = read_share(plan, r, local_ids=v.local_ids, halo_ids=v.halo_ids)
        lid = sh["local_ids"]
        assert np.array_equal(sh["node"]["x"].numpy(), x[lid])
        assert np.array_equal(sh["node"]["y"].numpy(), y[lid])
        eids = sh["edge_ids"]
        assert np.array_equal(np.sort(eids), np.flatnonzero(np.isin(rows_of, lid)))
        ext = np.concatenate([lid, v.halo_ids])
        assert np.array_equal(ext[sh["edge_index"][0]], indices[eids])
        assert np.array_equal(ext[sh["edge_index"][1]], rows_of[eids])


def test_balance_rows_or_weights_is_what_the_partition_balances(tmp_path):
    from partplan.errors import OptionError
    from partplan.nn.shares import memory_weights
    from torch_geometric.data import Data
    g = partplan.datasets.load("polblogs")
    ei = torch.from_numpy(np.vstack([np.asarray(g.indices), np.repeat(np.arange(g.n), np.diff(g.indptr))]))
    data = Data(edge_index=ei, num_nodes=g.n, x=torch.zeros(g.n, 64))
    k = 4
    for balance, w in (("rows", np.ones(g.n)),
                       (memory_weights(data, activation_bytes=40), None)):
        w = np.asarray(balance if w is None else w, dtype=np.int64)
        plan = partplan.plan_from_pyg(data, k, balance=balance, seed=0, backend="metis", progress=False)
        load = np.bincount(plan.part, weights=w, minlength=k)
        assert load.max() <= 1.03 * np.ceil(w.sum() / k) + w.max()          # METIS's ε plus one vertex
    # memory weights by hand: 256 bytes of x per row, 24 + 40 bytes per in-edge -> in-degree + 4
    indeg = np.bincount(ei[1].numpy(), minlength=g.n)
    assert np.array_equal(memory_weights(data, activation_bytes=40), indeg + 4)
    for bad in ("edges", np.ones(3, dtype=np.int64), -np.ones(g.n, dtype=np.int64), np.full(g.n, 1.5)):
        with pytest.raises(OptionError):
            partplan.plan_from_pyg(data, k, balance=bad)


def test_a_weighted_chunked_graph_carries_its_values_by_edge_id(tmp_path):
    from partplan.graph import Graph
    from partplan.io.chunked import write_chunked
    from partplan.nn.shares import read_share, write_shares
    g0 = partplan.datasets.load("polblogs")
    vals = np.random.default_rng(3).random(g0.nnz) + 0.5
    g = Graph(np.asarray(g0.indptr), np.asarray(g0.indices), vals, directed=g0.directed)
    write_chunked(g, tmp_path / "w.chunked", chunks=3)
    plan = tmp_path / "w.plan"
    partplan.write_plan(partplan.build_plan(g, partplan.partition(g, 2, seed=0)), plan)
    write_shares(plan, graph=tmp_path / "w.chunked")
    for r in range(2):
        sh = read_share(plan, r)
        assert np.array_equal(sh["edge"]["edge_weight"].numpy(), vals[sh["edge_ids"]])


def _patched(raw: bytes, field: str, index: int, value, dtype) -> bytes:
    """``raw`` with element ``index`` of the share array ``field`` set to ``value`` (numpy ``dtype``)."""
    at, _ = _arrays_of(raw)[field]
    b = bytearray(raw)
    item = np.array([value], dtype=dtype).tobytes()
    b[at + index * len(item):at + (index + 1) * len(item)] = item
    return bytes(b)


@pytest.mark.parametrize("field,value,dtype,msg", [
    ("node/x", float("nan"), np.float64, "field 'x'"),
    ("node/train_mask", 2, np.uint8, "is bool but holds the byte 2"),
])
def test_share_values_the_writer_refuses_are_refused_on_reading(planned, tmp_path, field, value, dtype, msg):
    """A re-signed share with a NaN feature or a bool mask byte of 2 was read and validated as
    valid; write_shares refuses a non-finite x, and a bool is 0 or 1."""
    from partplan.nn.shares import read_share, validate_shares
    data, path = planned
    bad = tmp_path / "v.plan"
    shutil.copytree(path, bad)
    _resign(bad, 0, _patched((path / "share-00000.arrow").read_bytes(), field, 0, value, dtype))
    with pytest.raises(PlanError, match=msg):
        read_share(bad, 0)
    assert any(msg in p for p in validate_shares(bad))


def test_halo_counts_that_disagree_with_their_owners_share_are_found_by_validate(planned, tmp_path):
    """halo_in_degree / halo_loops (what gcn_norm reads through Halo) were only checked for sign:
    a re-signed share claiming 10^15 in-edges for a halo row validated as valid and GCNConv through
    LocalHalo was 0.06 off PyG's. validate recounts them from each row's owner's share, and the
    oracle here is the data's own edge_index."""
    from partplan.nn.shares import read_share, validate_shares
    data, path = planned
    assert validate_shares(path) == []
    sh = read_share(path, 0)
    ei = data.edge_index.numpy()
    H = sh["halo_in_degree"].size
    assert H > 0
    halo_ids = np.asarray(LocalHalo(path).ranks[0].halo_ids)
    nonloop = np.bincount(ei[1][ei[0] != ei[1]], minlength=data.num_nodes)
    assert np.array_equal(sh["halo_in_degree"], nonloop[halo_ids])          # the oracle agrees untampered
    for field in ("halo_in_degree", "halo_loops"):
        bad = tmp_path / f"{field}.plan"
        shutil.copytree(path, bad)
        _resign(bad, 0, _patched((path / "share-00000.arrow").read_bytes(), field, 0, 10 ** 15, np.int64))
        probs = validate_shares(bad)
        assert len(probs) == 1 and field in probs[0] and str(int(halo_ids[0])) in probs[0]
