"""The scripts under benchmarks/ answer bad values as the CLI does: one ``SCRIPT: error:`` line and
exit 2, never a traceback. Each runs here in this process (``runpy``, as ``python SCRIPT ...``)."""
from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_every_script_runs_its_main_through_the_one_runner():
    for script in sorted(BENCH.glob("*.py")):
        text = script.read_text()
        tail = text[text.rindex('if __name__ == "__main__":'):]
        assert re.search(r"\brun(_script)?\(", tail), f"{script.name}: its __main__ does not call run(main)"


@pytest.mark.parametrize("script, argv, needle", [
    ("bench_families.py", ["--k", "0"], "--k"),
    ("bench_cli_time.py", ["--repeats", "0"], "--repeats"),
    ("bench_steal.py", ["--p", "0"], "--p"),
    ("bench_distributed.py", ["--engines", "metis"], "metis"),
    ("bench_plan.py", ["--scale", "0"], "scale"),
    ("bench_topology.py", ["--domain", "0"], "--domain"),
])
def test_a_bad_value_is_one_line_and_exit_2(script, argv, needle, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(BENCH / script), *argv])
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(str(BENCH / script), run_name="__main__")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ": error:" in ln]
    assert len(lines) == 1 and needle in lines[0], err


@pytest.mark.slow
@pytest.mark.parametrize("script, argv, wrote", [
    # main returned its report dict, which the runner's int() refused after the table (exit 1)
    ("bench_trust.py", ["--scale", "10", "--p", "2", "--repeat", "1"], None),
    # --fast with --json wrote no file
    ("bench_refine.py", ["power", "-k", "4", "--fast", "--repeat", "1", "--json", "r.json"],
     "r.json"),
    # the domain route's independent message count ignored the lanes (8 messages, 2 domain pairs): FAIL
    ("bench_topology.py", ["--graphs", "polblogs", "--no-gloo", "--p", "8", "--domain", "4"], None),
])
def test_a_small_run_exits_0_and_writes_what_it_is_asked(script, argv, wrote, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(BENCH / script), *argv])
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(str(BENCH / script), run_name="__main__")
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err[-2000:]
    assert " FAIL " not in out and "Traceback" not in err
    if wrote:
        assert (tmp_path / wrote).stat().st_size > 2


def test_every_script_writes_its_results_as_json_on_request(capsys, monkeypatch, tmp_path):
    """Users' convention: each benchmark script's --help offers --json (gpu_check: --out, its JSON),
    so a run's figures can be kept without scraping its table."""
    monkeypatch.chdir(tmp_path)
    missing = []
    for script in sorted(BENCH.glob("*.py")):
        monkeypatch.setattr(sys, "argv", [str(script), "--help"])
        with pytest.raises(SystemExit) as exc:
            runpy.run_path(str(script), run_name="__main__")
        out = capsys.readouterr().out
        option = "--out" if script.name == "gpu_check.py" else "--json"
        if exc.value.code != 0 or option not in out:
            missing.append(script.name)
    assert not missing, missing


@pytest.mark.slow
@pytest.mark.parametrize("script, argv", [
    ("bench_steal.py", ["--scale", "9", "--roots", "1", "--solver-p", "4", "--strip", "60", "--skip-gloo",
                        "--png", ""]),
    ("bench_topology.py", ["--graphs", "polblogs", "--no-gloo", "--p", "8", "--domain", "4"]),
])
def test_json_holds_what_the_table_prints(script, argv, capsys, monkeypatch, tmp_path):
    import json
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(BENCH / script), *argv, "--json", "out.json"])
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(str(BENCH / script), run_name="__main__")
    out = capsys.readouterr().out
    assert exc.value.code == 0
    got = json.loads((tmp_path / "out.json").read_text())
    assert got["command"].startswith(f"python benchmarks/{script}")
    if script == "bench_steal.py":     # each printed balance row, by its graph and partition
        for r in got["balance"]:
            assert re.search(rf"{re.escape(r['graph'])}\s+{r['partition']}\s+{r['levels']}\s+{r['triggered']}\s", out)
        assert [r["mode"] for r in got["osteal"]] == ["none", "fsteal", "fsteal+osteal"]
    else:
        routes = got["graphs"][0]["routes"]
        assert [r["route"] for r in routes] == ["flat", "source", "domain"] and got["failed_checks"] == 0
        for r in routes:
            assert re.search(rf"^{r['route']}\s+{r['crossing_rows']}\s", out, re.M) and r["exact"]
