"""What `partplan plan` takes from its --partition, checked against the graph in both builds: a
saved partition's graph and provenance (from the distributed partitioner too), a plan directory's
layout and provenance, a METIS NAME.part.K file's K, --column only on tables, ids past int64."""
from __future__ import annotations

import json

import numpy as np
import pytest

from partplan.graph import Graph
from partplan.io.chunked import write_chunked
from tests.errlines import one_line, run_cli


def _mtx(path, g: Graph):
    r = np.repeat(np.arange(g.n), np.diff(g.indptr))
    keep = r >= g.indices
    lines = [f"{a + 1} {b + 1}" for a, b in zip(r[keep], g.indices[keep])]
    path.write_text(f"%%MatrixMarket matrix coordinate pattern symmetric\n{g.n} {g.n} {len(lines)}\n"
                    + "\n".join(lines) + "\n")
    return path


def _ring(n: int, chord: int) -> Graph:
    src = np.r_[np.arange(n), np.arange(0, n, 3)]
    dst = np.r_[(np.arange(n) + 1) % n, (np.arange(0, n, 3) + chord) % n]
    return Graph.from_edges(src, dst, n=n, symmetrize=True, self_loops="remove")


def _manifest(plan):
    return json.loads((plan / "manifest.json").read_text())


def test_a_plan_as_the_partition_keeps_its_layout_and_provenance(tmp_path, capsys):
    g = _mtx(tmp_path / "g.mtx", _ring(24, 5))
    bare = tmp_path / "b.npy"
    np.save(bare, np.arange(24) % 3)
    rc, _, err = run_cli(["plan", g, "--partition", bare, "--layout", "1.5d:2", "-q", "-o", tmp_path / "a.plan"],
                         capsys)
    assert rc == 0, err
    rc, _, err = run_cli(["plan", g, "--partition", tmp_path / "a.plan", "-q", "-o", tmp_path / "r.plan"], capsys)
    assert rc == 0, err
    m = _manifest(tmp_path / "r.plan")
    assert (m["layout"], m["ranks"], m["row_blocks"]) == ("1.5d:2", 6, 3)
    rc, _, err = run_cli(["partition", g, "-k", "4", "--engine", "metis", "--seed", "5", "-q",
                          "-o", tmp_path / "s.npy"], capsys)
    assert rc == 0, err
    rc, _, err = run_cli(["plan", g, "--partition", tmp_path / "s.npy", "-q", "-o", tmp_path / "s.plan"], capsys)
    rc, _, err = run_cli(["plan", g, "--partition", tmp_path / "s.plan", "-q", "-o", tmp_path / "t.plan"], capsys)
    assert rc == 0, err
    first, again = _manifest(tmp_path / "s.plan"), _manifest(tmp_path / "t.plan")
    assert first["seed"] == 5 and again["seed"] == 5
    assert again["params"]["seed"] == 5 and again["backend"] == first["backend"] == "metis"
    rc, _, err = run_cli(["plan", g, "--partition", tmp_path / "s.plan", "-k", "3", "-q",
                          "-o", tmp_path / "u.plan"], capsys)
    one_line(rc, err, 2, "k = 3 (-k)", "use k = 4")


def test_a_metis_part_k_file_keeps_its_k(tmp_path, capsys):
    g = _mtx(tmp_path / "g.mtx", _ring(24, 5))
    f = tmp_path / "g.part.5"
    f.write_text("\n".join(str(i % 3) for i in range(24)) + "\n")    # ids 0..2 of 5 parts
    rc, _, err = run_cli(["plan", g, "--partition", f, "-q", "-o", tmp_path / "k.plan"], capsys)
    assert rc == 0, err
    assert _manifest(tmp_path / "k.plan")["ranks"] == 5
    rc, _, err = run_cli(["plan", g, "--partition", f, "-k", "6", "-q", "-o", tmp_path / "x.plan"], capsys)
    one_line(rc, err, 2, "k = 6 (-k)")
    assert not (tmp_path / "x.plan").exists()


def test_column_is_for_tables_only(tmp_path, capsys):
    g = _mtx(tmp_path / "g.mtx", _ring(24, 5))
    p = tmp_path / "p.npy"
    np.save(p, np.arange(24) % 2)
    rc, _, err = run_cli(["plan", g, "--partition", p, "--column", "part", "-q", "-o", tmp_path / "c.plan"], capsys)
    one_line(rc, err, 2, "p.npy", "--column")


@pytest.mark.parametrize("values, dtype", [([0, 1, 2 ** 63 + 5], np.uint64), ([0, 1, 1e20], np.float64)])
def test_ids_past_int64_are_named_as_they_are(tmp_path, capsys, values, dtype):
    g = _mtx(tmp_path / "g.mtx", _ring(3, 1))
    p = tmp_path / "p.npy"
    np.save(p, np.array(values, dtype=dtype))
    rc, _, err = run_cli(["plan", g, "--partition", p, "-q", "-o", tmp_path / "c.plan"], capsys)
    line = one_line(rc, err, 2, "p.npy", "vertex 2", "2^63")
    assert "negative" not in line


@pytest.mark.dist
def test_a_distributed_partition_names_its_graph_and_provenance(tmp_path, capsys):
    """The --nprocs partitioner's sidecar holds the chunked graph's fingerprint and the run's
    params: a plan of it keeps the seed, and a plan of another graph with the same n is refused
    by both builds."""
    import shutil
    if shutil.which("mpirun") is None:
        pytest.skip("needs OpenMPI's mpirun (make mpi)")
    g, other = _ring(40, 7), _ring(40, 11)
    d = write_chunked(g, tmp_path / "g.chunked", chunks=4)
    dother = write_chunked(other, tmp_path / "o.chunked", chunks=4)
    rc, _, err = run_cli(["partition", d, "-k", "4", "--nprocs", "2", "--engine", "stream", "--seed", "7", "-q",
                          "-o", tmp_path / "d.npy"], capsys)
    assert rc == 0, err
    side = json.loads((tmp_path / "d.npy.json").read_text())
    assert side["graph_fingerprint"] == g.fingerprint
    assert side["params"]["seed"] == 7 and side["params"]["nprocs"] == 2
    gm = _mtx(tmp_path / "g.mtx", g)
    rc, _, err = run_cli(["plan", gm, "--partition", tmp_path / "d.npy", "-q", "-o", tmp_path / "p.plan"], capsys)
    assert rc == 0, err
    assert _manifest(tmp_path / "p.plan")["seed"] == 7
    om = _mtx(tmp_path / "o.mtx", other)
    rc, _, err = run_cli(["plan", om, "--partition", tmp_path / "d.npy", "-q", "-o", tmp_path / "x.plan"], capsys)
    one_line(rc, err, 2, "d.npy", "made for graph")
    rc, _, err = run_cli(["plan", dother, "--partition", tmp_path / "d.npy", "--nprocs", "2", "-q",
                          "-o", tmp_path / "y.plan"], capsys)
    one_line(rc, err, 2, "d.npy", "made for graph")
    assert not (tmp_path / "x.plan").exists() and not (tmp_path / "y.plan").exists()


@pytest.mark.dist
def test_the_distributed_build_reads_partitions_as_the_one_process_build(tmp_path, capsys):
    import shutil
    if shutil.which("mpirun") is None:
        pytest.skip("needs OpenMPI's mpirun (make mpi)")
    g = _ring(30, 7)
    d = write_chunked(g, tmp_path / "g.chunked", chunks=4)
    over = tmp_path / "o.part.3"
    over.write_text("\n".join(str(i % 4) for i in range(30)) + "\n")       # id 3 in a file named for 3 parts
    rc, _, err = run_cli(["plan", d, "--partition", over, "--nprocs", "2", "-q", "-o", tmp_path / "o.plan"], capsys)
    one_line(rc, err, 2, "o.part.3", ">= k=3")
    neg = tmp_path / "n.npy"
    np.save(neg, np.r_[np.zeros(29, np.int64), -1])
    rc, _, err = run_cli(["plan", d, "--partition", neg, "--nprocs", "2", "-q", "-o", tmp_path / "n.plan"], capsys)
    one_line(rc, err, 2, "vertex 29 has negative part id -1")
    whole = tmp_path / "f.npy"
    np.save(whole, (np.arange(30) % 2).astype(np.float64))                  # integral floats: the ids 0 and 1
    rc, _, err = run_cli(["plan", d, "--partition", whole, "--nprocs", "2", "-q", "-o", tmp_path / "f.plan"], capsys)
    assert rc == 0, err
    assert _manifest(tmp_path / "f.plan")["ranks"] == 2
    # --json: the one-process build's summary (layout, figures, steps), and the processes' own
    rc, out, err = run_cli(["plan", d, "--partition", whole, "--nprocs", "2", "-q", "--json", "-o",
                            tmp_path / "j.plan"], capsys)
    assert rc == 0, err
    dist = json.loads(out)
    rc, out, err = run_cli(["plan", _mtx(tmp_path / "g.mtx", g), "--partition", whole, "-q", "--json", "-o",
                            tmp_path / "one.plan"], capsys)
    assert rc == 0, err
    one = json.loads(out)
    for key in ("layout", "ranks", "row_blocks", "backward", "groups", "steps", "stats"):
        assert dist[key] == one[key], key
    assert dist["processes"] == 2


def test_the_distributed_reader_names_vertices_of_the_whole_graph(tmp_path):
    """read_part_slice reads a process's slice [lo, hi): a bad id is named by its vertex in the
    graph, not in the slice; an array partition is checked as a file is (uint64 past 2^63,
    integral floats)."""
    from partplan.errors import PartitionError
    from partplan.plan.distbuild import partition_ranks, read_part_slice
    p = tmp_path / "neg.npy"
    a = np.zeros(30, np.int64)
    a[25] = -1
    np.save(p, a)
    with pytest.raises(PartitionError, match="vertex 25 has negative part id -1"):
        read_part_slice(p, 30, 4, 20, 30)
    with pytest.raises(PartitionError, match="vertex 25 has negative part id -1"):
        partition_ranks(p, 30, block=8)
    with pytest.raises(PartitionError, match="vertex 2 has part id 9223372036854775813"):
        read_part_slice(np.array([0, 1, 2 ** 63 + 5], np.uint64), 3, 4, 0, 3)
    assert read_part_slice(np.array([0.0, 1.0, 1.0]), 3, 2, 1, 3).tolist() == [1, 1]


@pytest.mark.dist
def test_a_part_k_file_is_exact_in_the_distributed_build(tmp_path, capsys):
    import shutil
    if shutil.which("mpirun") is None:
        pytest.skip("needs OpenMPI's mpirun (make mpi)")
    d = write_chunked(_ring(24, 5), tmp_path / "g.chunked", chunks=4)
    f = tmp_path / "g.part.5"
    f.write_text("\n".join(str(i % 3) for i in range(24)) + "\n")
    rc, _, err = run_cli(["plan", d, "--partition", f, "-k", "6", "--nprocs", "2", "-q",
                          "-o", tmp_path / "x.plan"], capsys)
    one_line(rc, err, 2, "k = 6 (-k)")
    rc, _, err = run_cli(["plan", d, "--partition", f, "--nprocs", "2", "-q", "-o", tmp_path / "y.plan"], capsys)
    assert rc == 0, err
    assert _manifest(tmp_path / "y.plan")["ranks"] == 5


# ----------------------------------------------------------- tables with ids, refusals, provenance
def _recount_total(g: Graph, part: np.ndarray) -> int:
    """Rows of H each part receives (a column j read by a row of part p, j owned elsewhere), summed."""
    rows = np.repeat(np.arange(g.n), np.diff(g.indptr))
    pairs = np.unique(part[rows] * g.n + g.indices)
    return int((part[pairs % g.n] != pairs // g.n).sum())


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_table_with_a_vertex_column_in_any_order_is_read_by_its_ids(tmp_path, capsys, fmt):
    g = _ring(60, 7)
    gf = _mtx(tmp_path / "g.mtx", g)
    part = (np.arange(60) * 7 // 60) % 4
    perm = np.random.default_rng(3).permutation(60)
    path = tmp_path / f"p.{fmt}"
    if fmt == "csv":
        path.write_text("vertex,part\n" + "".join(f"{v},{part[v]}\n" for v in perm))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.table({"Node": perm, "part": part[perm]}), path)
    rc, _, err = run_cli(["plan", gf, "--partition", path, "-q", "--json", "-o", tmp_path / "t.plan"], capsys)
    assert rc == 0, err
    assert _manifest(tmp_path / "t.plan")["stats"]["total_volume"] == _recount_total(g, part)
    assert _recount_total(g, part) != _recount_total(g, part[perm])     # row order would have been wrong


@pytest.mark.parametrize("rows, needle", [("0,1\n0,0\n" + "".join(f"{v},0\n" for v in range(2, 60)), "2 rows for vertex 0"),
                                          ("".join(f"{v},0\n" for v in range(59)) + "60,1\n", "vertex 60")])
def test_a_vertex_column_that_misses_or_repeats_a_vertex_is_refused(tmp_path, capsys, rows, needle):
    gf = _mtx(tmp_path / "g.mtx", _ring(60, 7))
    path = tmp_path / "p.csv"
    path.write_text("vertex,part\n" + rows)
    rc, _, err = run_cli(["plan", gf, "--partition", path, "-o", tmp_path / "t.plan"], capsys)
    one_line(rc, err, 2, "p.csv", "'vertex'", needle)
    assert not (tmp_path / "t.plan").exists()


def test_the_distributed_build_refuses_what_it_cannot_build_in_the_users_terms(tmp_path, capsys):
    g = _ring(40, 5)
    gf, ch = _mtx(tmp_path / "g.mtx", g), tmp_path / "g.chunked"
    write_chunked(g, ch, chunks=4)
    dec = tmp_path / "d.npy"
    rc, _, err = run_cli(["partition", gf, "-k", 4, "--preset", "fast", "--ownership", "decoupled", "-q",
                          "-o", dec], capsys)
    assert rc == 0, err
    rc, _, err = run_cli(["plan", ch, "--partition", dec, "--nprocs", 2, "-o", tmp_path / "x.plan"], capsys)
    one_line(rc, err, 2, "d.npy", "decoupled", "without --nprocs")
    plan = tmp_path / "a.plan"
    rc, _, err = run_cli(["plan", gf, "--partition", dec, "-q", "-o", plan], capsys)
    assert rc == 0, err
    rc, _, err = run_cli(["plan", ch, "--partition", plan, "--nprocs", 2, "-o", tmp_path / "y.plan"], capsys)
    line = one_line(rc, err, 2, "a.plan", "leave --nprocs out")
    assert "DGL" not in line
    two = tmp_path / "two.csv"
    two.write_text("a,b\n" + "".join(f"{v % 2},{v % 4}\n" for v in range(40)))
    rc, _, err = run_cli(["plan", ch, "--partition", two, "--column", "c", "--nprocs", 2, "-o", tmp_path / "z.plan"],
                         capsys)
    one_line(rc, err, 2, "two.csv", "'c'")              # a column the table lacks, named before any process starts
    rc, _, err = run_cli(["plan", ch, "--partition", dec, "--column", "b", "--nprocs", 2, "-o", tmp_path / "z.plan"],
                         capsys)
    one_line(rc, err, 2, "d.npy", "--column applies to Parquet/Arrow/CSV")


@pytest.mark.parametrize("value, shown", [(np.nan, "nan"), (2.5, "2.5"), (np.inf, "inf")])
def test_a_part_id_that_is_no_whole_number_is_named_by_its_vertex(tmp_path, capsys, value, shown):
    gf = _mtx(tmp_path / "g.mtx", _ring(30, 4))
    part = (np.arange(30) % 3).astype(float)
    part[17] = value
    np.save(tmp_path / "p.npy", part)
    rc, _, err = run_cli(["plan", gf, "--partition", tmp_path / "p.npy", "-o", tmp_path / "t.plan"], capsys)
    one_line(rc, err, 2, "p.npy", "vertex 17", shown, "integer part ids")


def test_k_that_disagrees_names_the_partition_file(tmp_path, capsys):
    gf = _mtx(tmp_path / "g.mtx", _ring(30, 4))
    np.save(tmp_path / "five.npy", np.arange(30) % 5)
    rc, _, err = run_cli(["plan", gf, "--partition", tmp_path / "five.npy", "-k", 4, "-o", tmp_path / "t.plan"],
                         capsys)
    one_line(rc, err, 2, "five.npy", "k = 4")


def test_a_plan_of_a_bare_partition_planned_again_keeps_its_manifest(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    gf = _mtx(tmp_path / "g.mtx", _ring(30, 4))
    np.save(tmp_path / "p.npy", np.arange(30) % 3)
    first, again = tmp_path / "a.plan", tmp_path / "b.plan"
    assert run_cli(["plan", gf, "--partition", tmp_path / "p.npy", "-q", "-o", first], capsys)[0] == 0
    assert run_cli(["plan", gf, "--partition", first, "-q", "-o", again], capsys)[0] == 0
    a, b = _manifest(first), _manifest(again)
    assert a["model"] is None and a["backend"] is None
    assert {f: b[f] for f in ("model", "backend", "objective", "seed", "params")} == \
        {f: a[f] for f in ("model", "backend", "objective", "seed", "params")}


def test_a_bare_partition_whose_ids_skip_values_is_warned_about(tmp_path, capsys):
    """Ids {0, 1, 7} in a bare file read as 8 parts: the five ranks the ids skip would hold no
    rows, said once as a warning (the plan is still written: empty ranks may be meant); ids
    0..K-1, or a declared count, say nothing."""
    g = _mtx(tmp_path / "g.mtx", _ring(24, 5))
    part = np.arange(24) % 3
    part[part == 2] = 7
    gap = tmp_path / "gap.part"
    gap.write_text("\n".join(map(str, part)) + "\n")
    rc, _, err = run_cli(["plan", g, "--partition", gap, "-q", "-o", tmp_path / "a.plan"], capsys)
    assert rc == 0, err
    warnings = [ln for ln in err.splitlines() if ln.startswith("partplan: warning:")]
    assert len(warnings) == 1 and "skip 2, 3, 4, 5, 6" in warnings[0] and "5 of its 8 ranks" in warnings[0]
    assert _manifest(tmp_path / "a.plan")["ranks"] == 8
    ok = tmp_path / "ok.part"
    ok.write_text("\n".join(map(str, np.arange(24) % 3)) + "\n")
    for extra in ([], ["-k", "5"]):
        rc, _, err = run_cli(["plan", g, "--partition", ok, "-q", "-o", tmp_path / "b.plan", *extra], capsys)
        assert rc == 0 and "warning" not in err, err
