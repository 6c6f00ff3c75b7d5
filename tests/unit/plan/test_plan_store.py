"""Plan store: atomic write, per-rank memory-mapped load, checksums, every corruption
case raising PlanError with the file and field named, determinism, validator."""
import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from partplan import Graph, PlanError
from partplan.plan import build_plan, load_plan, read_manifest, write_plan
from partplan.runtime.validate import validate_plan


def make_graph(seed=0, directed=True, n=120, m=600):
    rng = np.random.default_rng(seed)
    return Graph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), rng.random(m) + 0.5, n=n,
                            symmetrize=not directed, name=f"g{seed}")


@pytest.fixture
def plan_dir(tmp_path):
    g = make_graph()
    part = np.random.default_rng(1).integers(0, 4, g.n)
    return g, write_plan(build_plan(g, part, 4), tmp_path / "g.plan")


def test_layout_of_the_directory(plan_dir):
    g, path = plan_dir
    names = sorted(os.listdir(path))
    assert names == ["manifest.json", "partition.arrow"] + [f"rank-{r:05d}.arrow" for r in range(4)]
    m = json.loads((path / "manifest.json").read_text())
    assert m["format_version"] == 2 and m["graph"]["fingerprint"] == g.fingerprint
    for s in m["shards"]:
        data = (path / s["file"]).read_bytes()
        assert len(data) == s["bytes"] and hashlib.sha256(data).hexdigest() == s["sha256"]
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]   # no temp dirs left


def test_load_one_rank_is_memory_mapped_and_equal(plan_dir):
    g, path = plan_dir
    full = build_plan(g, load_plan(path).part, 4)
    rp = load_plan(path, rank=2)
    for name, arr in full[2].arrays.items():
        assert np.array_equal(rp.arrays[name], arr), name
    assert not rp["fwd.1.idx"].flags.writeable     # a view of the read-only memory map
    # the shard is an Arrow IPC file with one record batch (readable by plain pyarrow)
    with pa.memory_map(str(path / "rank-00002.arrow")) as src:
        batch = ipc.open_file(src).get_batch(0)
        assert batch.num_rows == 1 and "fwd.2.recv_ids" in batch.schema.names


def test_rank_alone_does_not_touch_other_shards(plan_dir):
    g, path = plan_dir
    os.remove(path / "rank-00003.arrow")
    assert load_plan(path, rank=1).rank == 1          # still loadable alone
    with pytest.raises(PlanError, match=r"rank-00003.arrow: shard of rank 3 is missing"):
        load_plan(path)


def test_flipped_byte_in_a_shard(plan_dir):
    g, path = plan_dir
    f = path / "rank-00001.arrow"
    b = bytearray(f.read_bytes())
    b[len(b) // 2] ^= 0x01
    f.write_bytes(bytes(b))
    with pytest.raises(PlanError, match=r"rank-00001.arrow: shard of rank 1 is corrupted: sha256"):
        load_plan(path, rank=1)
    with pytest.raises(PlanError, match="corrupted"):
        validate_plan(path)


def test_truncated_shard(plan_dir):
    g, path = plan_dir
    f = path / "rank-00000.arrow"
    f.write_bytes(f.read_bytes()[:-100])
    with pytest.raises(PlanError, match=r"rank-00000.arrow: shard of rank 0 truncated: .* field 'bytes'"):
        load_plan(path, rank=0)


def test_manifest_from_another_graph(plan_dir, tmp_path):
    g, path = plan_dir
    other = make_graph(seed=5)
    with pytest.raises(PlanError, match="graph.fingerprint.*another graph"):
        load_plan(path, graph=other)
    with pytest.raises(PlanError, match="another graph"):
        validate_plan(path, other)
    # a manifest copied from a plan of another graph: shards no longer belong to it
    p2 = write_plan(build_plan(other, np.arange(other.n) % 4, 4), tmp_path / "other.plan")
    shutil.copy(p2 / "manifest.json", path / "manifest.json")
    with pytest.raises(PlanError, match="manifest and shards come from different plans"):
        load_plan(path, rank=0)


def test_unknown_version_and_bad_manifest(plan_dir):
    g, path = plan_dir
    mf = path / "manifest.json"
    m = json.loads(mf.read_text())
    m["format_version"] = 99
    mf.write_text(json.dumps(m))
    with pytest.raises(PlanError, match="field 'format_version' = 99 is not supported"):
        load_plan(path, rank=0)
    mf.write_text("{not json")
    with pytest.raises(PlanError, match="manifest.json: not valid JSON"):
        load_plan(path)
    mf.unlink()
    with pytest.raises(PlanError, match="missing manifest"):
        load_plan(path)
    mf.mkdir()       # a directory where the manifest belongs: said as such
    with pytest.raises(PlanError, match="manifest.json: the manifest is a directory"):
        load_plan(path)


def meta_fix(path: Path, rank: int, edit):
    """Edit a shard's forward buffer sizes (metadata) and re-sign it."""
    from partplan.plan.store import _read_arrow, _write_arrow
    f = path / f"rank-{rank:05d}.arrow"
    meta, arrays = _read_arrow(f)
    arrays = {k: np.array(v) for k, v in arrays.items()}
    edit(meta["programs"]["forward"]["buffers"])
    size, digest = _write_arrow(f, arrays, meta)
    m = json.loads((path / "manifest.json").read_text())
    m["shards"][rank].update(bytes=size, sha256=digest)
    (path / "manifest.json").write_text(json.dumps(m))


def _rewrite_shard(path: Path, rank: int, edit):
    """Edit one array of a shard and re-sign it in the manifest (a buggy writer)."""
    from partplan.plan.store import _read_arrow, _write_arrow
    f = path / f"rank-{rank:05d}.arrow"
    meta, arrays = _read_arrow(f)
    arrays = {k: np.array(v) for k, v in arrays.items()}
    edit(arrays)
    tmp = f.with_suffix(".new")
    size, digest = _write_arrow(tmp, arrays, meta)
    os.replace(tmp, f)
    m = json.loads((path / "manifest.json").read_text())
    m["shards"][rank].update(bytes=size, sha256=digest)
    (path / "manifest.json").write_text(json.dumps(m))


def test_edited_count_without_resigning_is_a_checksum_error(plan_dir):
    g, path = plan_dir
    from partplan.plan.store import _read_arrow, _write_arrow
    f = path / "rank-00002.arrow"
    meta, arrays = _read_arrow(f)
    arrays = {k: np.array(v) for k, v in arrays.items()}
    arrays["fwd.2.send_counts"][0] += 1
    _write_arrow(f, arrays, meta)
    with pytest.raises(PlanError, match="rank-00002.arrow"):
        load_plan(path, rank=2)


def test_edited_count_resigned_is_caught_by_the_validator(plan_dir):
    g, path = plan_dir

    def edit(a):
        q = int(np.flatnonzero(a["fwd.2.send_counts"])[0])
        a["fwd.2.send_counts"][q] -= 1
        a["fwd.1.idx"] = a["fwd.1.idx"][:-1]
    _rewrite_shard(path, 1, edit)
    meta_fix(path, 1, lambda bufs: bufs.update(send=bufs["send"] - 1))  # buffer sizes follow the edit
    from partplan.runtime.spmm import local_executor
    load_plan(path, rank=1)  # fits its own buffers: left to the executor, which stops every rank alike
    with pytest.raises(PlanError, match=r"rank 1: fwd.2: shard counts differ from the manifest.s pairs"):
        local_executor(path)
    rep = validate_plan(path, g)              # validate reports it
    assert not rep["ok"]
    bad = {c["name"]: c["detail"] for c in rep["checks"] if not c["ok"]}
    assert "rank 1 (rank-00001.arrow)" in bad["structure"] and "fwd.2.send_counts" in bad["structure"]
    # re-signing the manifest's pairs too makes rank 1 consistent and exposes its peer instead
    m = json.loads((path / "manifest.json").read_text())
    sc = load_plan(path, rank=1, check=False)["fwd.2.send_counts"]
    st = m["programs"]["forward"]["steps"][2]
    st["pairs"] = [x for x in ([q, r, int(sc[r])] if q == 1 else [q, r, c] for q, r, c in st["pairs"]) if x[2] > 0]
    (path / "manifest.json").write_text(json.dumps(m))
    load_plan(path, rank=1)
    bad = {c["name"]: c["detail"] for c in validate_plan(path, g)["checks"] if not c["ok"]}
    assert "fwd.2.recv_counts' differs from the manifest's pairs" in bad["structure"]


def test_out_of_range_index_is_reported(plan_dir):
    g, path = plan_dir

    def edit(a):
        a["fwd.3.indices"][0] = 10 ** 6
    _rewrite_shard(path, 0, edit)
    rep = validate_plan(path)
    bad = {c["name"]: c["detail"] for c in rep["checks"] if not c["ok"]}
    assert "indices outside" in bad["structure"]


@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_wrong_rows_sent_are_caught_before_any_exchange(plan_dir, tmp_path, monkeypatch, chunk):
    """Another of rank 0's rows sent than the receiver lists, counts consistent: validate's id walk
    found it, but `run` multiplied the wrong rows with exit 0 (swapped rows: 0.53 off scipy's A @ H).
    The executor's start-up check now compares each (rank, peer) list of sent rows with the
    receiver's recv_ids, so validate reports it under its counts check and every run refuses it."""
    import partplan.runtime.interpreter as interpreter
    from partplan.runtime.spmm import local_executor
    monkeypatch.setattr(interpreter, "HASH_CHUNK", chunk)     # segments across the hashing's chunks too
    g, path = plan_dir
    local_executor(load_plan(path))                            # the plan as written passes

    def edit(a):  # send another of rank 0's rows than the receiver lists (counts stay consistent)
        idx = a["fwd.1.idx"]
        idx[0] = (idx[0] + 1) % a["fwd.in_ids"].size
    _rewrite_shard(path, 0, edit)
    rep = validate_plan(path)
    bad = {c["name"]: c["detail"] for c in rep["checks"] if not c["ok"]}
    assert "recv_ids" in bad["counts"]
    with pytest.raises(PlanError, match="recv_ids"):
        local_executor(load_plan(path, check=False))


def test_validator_passes_all_layouts(tmp_path):
    for directed in (True, False):
        g = make_graph(seed=3, directed=directed)
        part = np.random.default_rng(2).integers(0, 4, g.n)
        for layout, p in (("1d", 4), ("1.5d:2", 8), ("2d:2x2", 4)):
            path = write_plan(build_plan(g, part, p, layout=layout), tmp_path / f"{layout}-{directed}.plan")
            for graph in (None, g):
                rep = validate_plan(path, graph)
                assert rep["ok"], rep["checks"]


def test_determinism_same_bytes(tmp_path):
    g = make_graph(seed=7)
    part = np.random.default_rng(3).integers(0, 5, g.n)
    a = write_plan(build_plan(g, part, 5), tmp_path / "a.plan")
    b = write_plan(build_plan(g, part, 5), tmp_path / "b.plan", created="2000-01-01T00:00:00+00:00")
    for name in os.listdir(a):
        if name != "manifest.json":
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    ma, mb = (json.loads((p / "manifest.json").read_text()) for p in (a, b))
    diff = {k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k)}
    assert diff == {"created"}
    c = write_plan(build_plan(g, part, 5), tmp_path / "c.plan", created=False)
    assert "created" not in read_manifest(c)


def test_overwrite_is_atomic_and_refuses_foreign_dirs(tmp_path):
    g = make_graph(seed=8)
    path = write_plan(build_plan(g, np.arange(g.n) % 3, 3), tmp_path / "x.plan")
    write_plan(build_plan(g, np.arange(g.n) % 2, 2), path)        # replace a plan
    assert read_manifest(path)["k"] == 2
    foreign = tmp_path / "notaplan"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    with pytest.raises(PlanError, match="refusing to overwrite"):
        write_plan(build_plan(g, np.arange(g.n) % 2, 2), foreign)
    assert (foreign / "keep.txt").read_text() == "mine"


def test_pairs_of_reads_a_ranks_counts_as_the_dense_matrix_does():
    """``pairs_of`` (every reader's check of a rank's counts) against the dense p × p matrix of the
    same pairs indexed at [rank, members] and [members, rank]; repeated pairs add up. It scanned every
    pair for every rank (k³ at k ranks: 50 s of a 55 s export at k = 1024)."""
    from partplan.program.checks import pairs_of
    from partplan.program.core import matrix_to_pairs, pairs_to_matrix
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = int(rng.integers(1, 10))
        pairs = [[int(rng.integers(0, p)), int(rng.integers(0, p)), int(rng.integers(1, 9))]
                 for _ in range(int(rng.integers(0, 30)))]
        vol = pairs_to_matrix(pairs, p)
        members = [int(x) for x in rng.permutation(p)[:int(rng.integers(0, p + 1))]]
        for rank in range(p):
            send, recv = pairs_of({"pairs": pairs}, rank, members)
            assert send.tolist() == vol[rank, members].tolist() and recv.tolist() == vol[members, rank].tolist()
        assert np.array_equal(pairs_to_matrix(matrix_to_pairs(vol), p), vol)


def test_manifest_text_keeps_the_json_and_writes_each_steps_pairs_on_one_line():
    """The written manifest parses back to the manifest (numpy ints as ints), keeps indent=1 and
    sorted keys, writes each step's pairs on one line (the compiled encoder: an indented dump of k²
    pairs took 1.9 s at k = 1024), and falls back to indenting everything when the placeholder it
    uses appears in the manifest's own text."""
    import json

    from partplan.plan.store import manifest_text
    m = {"b": 1, "a": [1, 2], "programs": {"forward": {"steps": [
        {"op": "alltoallv", "pairs": [[0, 1, np.int64(3)], [1, 0, 2]]}, {"op": "spmm"}]},
        "backward": {"steps": [{"pairs": []}]}}}
    text = manifest_text(m)
    assert json.loads(text) == json.loads(json.dumps(m, default=int)) and text.endswith("}\n")
    assert '"pairs": [[0, 1, 3], [1, 0, 2]]' in text and text.index('"a"') < text.index('"b"')
    assert '\n "b": 1,' in text and m["programs"]["forward"]["steps"][0]["pairs"][1] == [1, 0, 2]
    odd = {"x": "partplan-step-pairs-0", "programs": {"f": {"steps": [{"pairs": [[1, 2, 3]]}]}}}
    assert json.loads(manifest_text(odd)) == odd


@pytest.mark.parametrize("bad", [[0, 1, True], [0, 1], [0, 99, 1], [0, 1, 0], [0, 1, 1.5], [0, 1, 2 ** 63 + 5],
                                 [-1, 1, 1], "0,1,1"])
def test_a_manifest_pair_that_is_not_three_ints_in_range_is_refused(tmp_path, bad):
    """Every pair of an alltoallv step is [src rank, dst rank, rows] ints with ranks in [0, k) and
    0 < rows <= n; one bad entry among many is refused, naming it."""
    g = Graph.from_edges(np.arange(40) % 20, (np.arange(40) * 7) % 20, n=20, symmetrize=True)
    path = write_plan(build_plan(g, np.arange(20) % 4, 4), tmp_path / "g.plan")
    mf = path / "manifest.json"
    m = json.loads(mf.read_text())
    st = next(st for st in m["programs"]["forward"]["steps"] if "pairs" in st)
    st["pairs"] = st["pairs"][:1] + [bad] + st["pairs"][1:]
    mf.write_text(json.dumps(m))
    with pytest.raises(PlanError, match=r"pairs.*(holds|must list)"):
        read_manifest(path)


def test_spmm_row_ids_outside_the_graph_are_refused_on_read(plan_dir):
    """An SpMM step's global row ids were never range-checked by the readers (`run spmm` and
    `run pagerank` went on with row 10^9 and exit 0); they are checked as recv_ids are."""
    g, path = plan_dir

    def edit(a):
        key = next(k for k in a if k.endswith(".row_ids"))
        a[key][0] = 10 ** 9
    _rewrite_shard(path, 0, edit)
    with pytest.raises(PlanError, match=r"row_ids' holds ids outside \[0, graph.n"):
        load_plan(path)
