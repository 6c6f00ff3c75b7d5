"""The planner benchmark on a tiny generated graph: ratios and geometric means
recomputed by hand from the rows, outputs written."""
import csv
import json
import math

import pytest

from partplan.bench.planner import format_table, load_bench_graph, run_bench, stochastic_compare


def test_bench_rows_ratios_and_outputs(tmp_path):
    res = run_bench(["rmat8"], [4, 8], methods=("block", "random", "metis", "hypergraph"), out=tmp_path,
                    preset="DETERMINISTIC")
    rows = res["rows"]
    assert len(rows) == 8
    by = {(r["k"], r["method"]): r for r in rows}
    for (k, m), r in by.items():
        for ref in ("random", "metis"):
            assert r[f"total_volume/{ref}"] == pytest.approx(r["total_volume"] / by[(k, ref)]["total_volume"])
        assert r["max_send_recv"] == max(r["max_send"], r["max_recv"])
    hv = [by[(k, "hypergraph")]["total_volume"] / by[(k, "metis")]["total_volume"] for k in (4, 8)]
    assert res["geomean"]["vs_metis"]["hypergraph"]["total_volume"] == pytest.approx(math.sqrt(hv[0] * hv[1]))
    with open(tmp_path / "bench_planner.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 8
    assert json.loads((tmp_path / "bench_planner.json").read_text())["meta"]["ks"] == [4, 8]
    assert (tmp_path / "bench_planner.png").read_bytes()[:4] == b"\x89PNG"
    assert "geometric mean ratio to metis" in format_table(res)


def test_bench_skips_unknown_dataset_with_reason():
    res = run_bench(["no-such-dataset"], [4], methods=("block",))
    assert res["rows"] == [] and res["skipped"][0]["dataset"] == "no-such-dataset"


def test_stochastic_compare_small():
    g = load_bench_graph("rmat8")
    r = stochastic_compare(g, 4, sampler="neighbor:16:4,2", theta=0.5, batches=20, preset="DETERMINISTIC")
    assert r["ratio"] == pytest.approx(r["stochastic"]["expected_volume"] / r["full_batch"]["expected_volume"])
    assert r["model"]["sampled_nets"] >= r["model"]["required_nets"]
