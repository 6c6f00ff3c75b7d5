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
    for name in sorted(os.listdir("s.plan")):
        if name != "manifest.json":
            assert filecmp.cmp(tmp_path / "s.plan" / name, tmp_path / "d.plan" / name, shallow=False), name
    ms, md = (json.loads((tmp_path / p / "manifest.json").read_text()) for p in ("s.plan", "d.plan"))
    ms.pop("created", None), md.pop("created", None)
    assert ms["ranks"] == 8 and ms["model"] == "graph" and ms["backend"] == "metis" and ms["seed"] == 3
    assert {k: md[k] for k in PROVENANCE} == {k: ms[k] for k in PROVENANCE}
    assert md == ms
