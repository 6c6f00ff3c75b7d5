"""Issue #51: a distributed plan build (``partplan plan DIR --nprocs N``) records
the saved partition's provenance (model, backend, objective, seed, params) in
its manifest as the one-process build does; the two manifests agree (the
shards are byte-identical), and the saved partition's layout and parts give
the ranks (no -k needed)."""
from __future__ import annotations

import filecmp
import json
import os

import pytest

from partplan.datasets import rmat
from partplan.io.chunked import write_chunked
from partplan.partition.api import partition, save_partition
from partplan.plan import build_plan, write_plan
from partplan.plan.partitions import partition_provenance

pytest.importorskip("torch")
from partplan.jobs.build import build_plan_distributed  # noqa: E402
from partplan.runtime.comm import LocalComm  # noqa: E402

PROVENANCE = ("model", "backend", "objective", "seed", "params")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("prov")
    g = rmat(9)
    write_chunked(g, d / "g", chunks=3)
    P = partition(g, 4, model="graph", seed=3)
    save_partition(P, d / "p4.npy")
    return g, d, P


def _same_shards_manifests(one, dist) -> tuple[dict, dict]:
    """Asserts the two plans' files but the manifest are byte-identical; returns their manifests
    without ``created``."""
    for name in sorted(os.listdir(one)):
        if name != "manifest.json":
            assert filecmp.cmp(one / name, dist / name, shallow=False), name
    ms, md = (json.loads((p / "manifest.json").read_text()) for p in (one, dist))
    ms.pop("created", None), md.pop("created", None)
    return ms, md


def test_provenance_read_from_the_sidecar(saved):
    g, d, P = saved
    prov = partition_provenance(d / "p4.npy")
    assert prov["model"] == "graph" and prov["backend"] == "metis" and prov["seed"] == 3
    assert prov["params"]["seed"] == 3 and prov["objective"] == P.objective
    assert partition_provenance(P.part) == {}                    # an array has none


def test_in_process_distributed_manifest_keeps_provenance(saved, tmp_path):
    g, d, P = saved
    one = write_plan(build_plan(g, P, meta={"partition_file": "p4.npy"}), tmp_path / "s.plan", created=False)
    build_plan_distributed(d / "g", d / "p4.npy", 4, tmp_path / "d.plan", comm=LocalComm(1, []), created=False,
                           meta={"partition_file": "p4.npy"})
    ms, md = (json.loads((p / "manifest.json").read_text()) for p in (one, tmp_path / "d.plan"))
    assert ms["model"] == "graph" and ms["seed"] == 3
    for key in PROVENANCE:
        assert md[key] == ms[key], key


@pytest.mark.dist
@pytest.mark.slow
def test_cli_nprocs_2_manifest_equals_one_process(saved, tmp_path, monkeypatch, capsys):
    """`plan DIR --partition saved --layout 1.5d:2 --nprocs 2` (no -k: 4 parts x 2 = 8 ranks) and the
    one-process `plan` agree on every manifest field but `created`, provenance included."""
    from partplan.cli.main import main
    g, d, P = saved
    monkeypatch.chdir(tmp_path)
    for out, extra in (("d.plan", ("--nprocs", "2")), ("s.plan", ())):
        rc = main(["plan", str(d / "g"), "--partition", str(d / "p4.npy"), "--layout", "1.5d:2", "-o", out, *extra])
        _, err = capsys.readouterr()
        assert rc == 0, err
    ms, md = _same_shards_manifests(tmp_path / "s.plan", tmp_path / "d.plan")
    assert ms["ranks"] == 8 and ms["model"] == "graph" and ms["backend"] == "metis" and ms["seed"] == 3
    assert {k: md[k] for k in PROVENANCE} == {k: ms[k] for k in PROVENANCE}
    assert md == ms


def test_a_declared_part_count_records_the_external_provenance_in_both_builds(saved, tmp_path):
    """A METIS NAME.part.K file is read as a Partition by the one-process build (model / backend
    "external", objective "total"); the distributed manifest records the same (found by a fuzzer:
    it recorded None for each)."""
    import numpy as np

    from partplan.plan.partitions import read_partition_file

    g, d, P = saved
    pf = tmp_path / "g.part.4"
    np.savetxt(pf, P.part, fmt="%d")
    assert partition_provenance(pf)["model"] == "external"
    one = write_plan(build_plan(g, read_partition_file(pf, g)), tmp_path / "s.plan", created=False)
    build_plan_distributed(d / "g", pf, 4, tmp_path / "d.plan", comm=LocalComm(1, []), created=False)
    ms, md = (json.loads((p / "manifest.json").read_text()) for p in (one, tmp_path / "d.plan"))
    assert ms["backend"] == "external" and ms["objective"] == "total"
    for key in PROVENANCE:
        assert md[key] == ms[key], key


def test_a_header_that_calls_an_asymmetric_matrix_undirected_is_refused(tmp_path):
    """header.json "directed": false over chunks that are not symmetric: both builds refuse it,
    naming the header's field (the plan carried the flag and validate then refused the plan)."""
    import numpy as np

    from partplan import Graph
    from partplan.errors import GraphFormatError
    from partplan.io.chunked import read_chunked

    write_chunked(Graph.from_edges([0, 1, 2], [1, 2, 3]), tmp_path / "g", chunks=2)
    h = json.loads((tmp_path / "g" / "header.json").read_text())
    h["directed"] = False
    (tmp_path / "g" / "header.json").write_text(json.dumps(h))
    np.save(tmp_path / "p.npy", np.array([0, 0, 1, 1]))
    for call in (lambda: read_chunked(tmp_path / "g"),
                 lambda: build_plan_distributed(tmp_path / "g", tmp_path / "p.npy", 2, tmp_path / "d.plan",
                                                comm=LocalComm(1, []))):
        with pytest.raises(GraphFormatError, match="directed.*not symmetric") as exc:
            call()
        assert exc.value.field == "directed" and "header.json" in str(exc.value)
    assert not (tmp_path / "d.plan").exists()


def test_sidecar_fields_are_checked_where_they_are_read(saved, tmp_path, capsys):
    """A sidecar's params.seed that is no integer, and an n that is not the graph's: one error naming
    the sidecar, before the build (it named the output manifest, after the build; n was taken as
    the graph's size)."""
    import shutil

    from tests.errlines import one_line, run_cli

    g, d, P = saved
    for field, value, needle in (("seed", "x", "'params.seed' must be an integer"), ("n", g.n + 1, "field 'n'")):
        shutil.copy(d / "p4.npy", tmp_path / "p.npy")
        meta = json.loads((d / "p4.npy.json").read_text())
        if field == "seed":
            meta["params"]["seed"] = value
        else:
            meta["n"] = value
        (tmp_path / "p.npy.json").write_text(json.dumps(meta))
        for extra in ([], ["--nprocs", "2"]):
            src = d / "g" if extra else tmp_path / "g.npz"
            if not extra:
                from partplan.io import write_graph
                write_graph(g, src)
            rc, _, err = run_cli(["plan", src, "--partition", tmp_path / "p.npy", "-o", tmp_path / "o.plan"] + extra,
                                 capsys)
            line = one_line(rc, err, 2, "p.npy")
            assert needle in line or (field == "n" and "n = " in line), line
            assert not (tmp_path / "o.plan").exists()


def test_a_pyg_partition_folder_records_the_external_provenance(saved, tmp_path):
    """A PyG partition folder declares its part count (META.json): the distributed build records
    the one-process build's external provenance for it, as for a file."""
    from partplan.interop.export import export_plan
    from partplan.plan.partitions import read_partition_file

    g, d, P = saved
    pp = write_plan(build_plan(g, P), tmp_path / "p.plan", created=False)
    export_plan(pp, "pyg", tmp_path / "pygpart")
    assert partition_provenance(tmp_path / "pygpart")["backend"] == "external"
    one = write_plan(build_plan(g, read_partition_file(tmp_path / "pygpart", g)), tmp_path / "s.plan", created=False)
    build_plan_distributed(d / "g", tmp_path / "pygpart", 4, tmp_path / "d.plan", comm=LocalComm(1, []),
                           created=False)
    ms, md = (json.loads((p / "manifest.json").read_text()) for p in (one, tmp_path / "d.plan"))
    for key in PROVENANCE:
        assert md[key] == ms[key], key


@pytest.mark.dist
@pytest.mark.slow
def test_a_declared_count_with_an_empty_last_part_keeps_its_ranks(saved, tmp_path, capsys, monkeypatch):
    """A CAGNET .part-sizes file whose last part is empty declares 4 parts: `--nprocs 2` takes -k 4
    (and without -k, 4 ranks) as the one-process build does, not max(id) + 1 = 3."""
    from tests.errlines import run_cli

    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
    g, d, P = saved
    n = g.n
    (tmp_path / "p.part-sizes").write_text(f"{n // 3} {n // 3} {n - 2 * (n // 3)} 0\n")
    for extra in (["-k", "4"], []):
        out = tmp_path / f"d{len(extra)}.plan"
        rc, _, err = run_cli(["-q", "plan", d / "g", "--partition", tmp_path / "p.part-sizes", "-o", out,
                              "--nprocs", "2"] + extra, capsys)
        assert rc == 0, err
        assert json.loads((out / "manifest.json").read_text())["ranks"] == 4


@pytest.mark.dist
@pytest.mark.slow
def test_a_table_column_builds_with_nprocs_as_in_one_process(saved, tmp_path, capsys, monkeypatch):
    """`plan DIR --partition t.parquet --column mine --nprocs 2` reads the named column, as the
    one-process build does (it was refused): the same shards and the same manifest."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.errlines import run_cli
    g, d, P = saved
    rng = np.random.default_rng(0)
    pq.write_table(pa.table({"part": rng.integers(0, 3, g.n), "mine": P.part}), tmp_path / "t.parquet")
    monkeypatch.chdir(tmp_path)
    for out, extra in (("d.plan", ["--nprocs", "2"]), ("s.plan", [])):
        rc, _, err = run_cli(["-q", "plan", d / "g", "--partition", "t.parquet", "--column", "mine", "-o", out]
                             + extra, capsys)
        assert rc == 0, err
    ms, md = _same_shards_manifests(tmp_path / "s.plan", tmp_path / "d.plan")
    assert md == ms and ms["ranks"] == 4
    from partplan.plan import load_plan
    assert np.array_equal(load_plan("d.plan").part, P.part)


@pytest.mark.dist
@pytest.mark.slow
def test_the_launcher_hashes_a_saved_partition_once_and_refuses_a_replaced_one(saved, tmp_path, capsys,
                                                                               monkeypatch):
    """`plan DIR --partition saved.npy --nprocs 2`: the sidecar's sha256 is checked once in the launcher
    (it was hashed twice: a partition of 10^9 rows takes seconds each), and a file replaced after its
    sidecar was written is still refused, with one error line."""
    import numpy as np

    import partplan.datasets.registry as registry
    from tests.errlines import one_line, run_cli
    g, d, P = saved
    calls = []
    real = registry.sha256_file
    monkeypatch.setattr(registry, "sha256_file", lambda p, *a, **kw: calls.append(str(p)) or real(p, *a, **kw))
    rc, _, err = run_cli(["-q", "plan", d / "g", "--partition", d / "p4.npy", "-o", tmp_path / "a.plan",
                          "--nprocs", "2"], capsys)
    assert rc == 0 and calls == [str(d / "p4.npy")], (err, calls)
    bad = tmp_path / "p4.npy"
    save_partition(P, bad)
    np.save(bad, P.part[::-1].copy())
    rc, _, err = run_cli(["-q", "plan", d / "g", "--partition", bad, "-o", tmp_path / "b.plan", "--nprocs", "2"],
                         capsys)
    one_line(rc, err, 2, "describes another p4.npy")
    assert not (tmp_path / "b.plan").exists()


@pytest.mark.dist
@pytest.mark.slow
def test_json_of_either_build_holds_the_one_process_keys(saved, tmp_path, monkeypatch, capsys):
    """A script reading `plan --json` or `partition --json` works with and without --nprocs: every
    key the one-process build prints is in the distributed one's (build_s, ranks, row_blocks and
    ownership were missing), with the same values where they describe the same result."""
    from partplan.cli.main import main
    g, d, P = saved
    monkeypatch.chdir(tmp_path)
    got = {}
    for name, extra in (("s", ()), ("d", ("--nprocs", "2"))):
        assert main(["-q", "plan", str(d / "g"), "--partition", str(d / "p4.npy"), "-o", f"{name}.plan", "--json",
                     *extra]) == 0
        got[f"plan-{name}"] = json.loads(capsys.readouterr().out)
        assert main(["-q", "partition", str(d / "g"), "-k", "4", "-o", f"{name}.npy", "--json", *extra]) == 0
        got[f"part-{name}"] = json.loads(capsys.readouterr().out)
    assert set(got["plan-s"]) <= set(got["plan-d"]), set(got["plan-s"]) - set(got["plan-d"])
    for key in ("layout", "ranks", "row_blocks", "backward", "groups", "steps", "stats"):
        assert got["plan-s"][key] == got["plan-d"][key], key
    one_only = set(got["part-s"]) - set(got["part-d"])
    assert one_only <= {"info", "layout_stats"}, one_only          # the one process's own measurements
    for key in ("k", "ranks", "row_blocks", "ownership", "layout", "schema"):
        assert got["part-s"][key] == got["part-d"][key], key
