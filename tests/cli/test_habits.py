"""Command-line habits (issue 19, item 7): one meaning per option name across
every command, -q everywhere, gpmetis's default output name, the .part.K
check, train gcn --predictions."""
from __future__ import annotations

import argparse
import collections
import os
from pathlib import Path

import numpy as np
import pytest

from partplan.cli.main import build_parser, iter_parsers, main

# what the cross-cutting names mean; the help of every use must say so
GLOSSARY = {
    "-f": ("--features", ("width", "columns")),
    "-k": ("-k", ("ranks", "parts")),
    "-o": ("--output", ("write", "output", "file", "directory")),
    "-q": ("--quiet", ("no progress",)),
    "-n": ("-n", ("number",)),
}


def _uses():
    """option string -> [(command, action)] over the whole argparse tree."""
    uses = collections.defaultdict(list)
    for path, p in iter_parsers(build_parser()):
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                continue
            for s in a.option_strings:
                uses[s].append((" ".join(path) or "partplan", a))
    return uses


# the kind of value an argparse type yields (validators differ: -k 0 is refused here, accepted there)
_KIND = {"int": "int", "positive_int": "int", "nonneg_int": "int", "float": "float", "nonneg_float": "float",
         "fraction": "float", "str": "str", "dtype": "str", "parse_layout": "str"}


def _type_name(a) -> str:
    t = a.type
    name = "str" if t is None or t is str else getattr(t, "__name__", repr(t)).lstrip("_")
    return _KIND.get(name, name)


def test_every_command_takes_quiet():
    missing = [" ".join(path) or "partplan" for path, p in iter_parsers(build_parser())
               if not any(a.option_strings == ["-q", "--quiet"] or set(a.option_strings) == {"-q", "--quiet"}
                          for a in p._actions)]
    assert missing == []


#: options whose one meaning is "which algorithm this command runs": their choices are the command's
#: own (analyze --method: a partitioner; run wcc --method: propagate or pointer-jump)
CHOICES_OF_THE_COMMAND = {"--method"}


def test_one_meaning_per_option_name():
    uses = _uses()
    problems = []
    # a short letter always stands for the same long name
    partner = collections.defaultdict(set)
    for s, lst in uses.items():
        if s.startswith("--"):
            continue
        for cmd, a in lst:
            longs = [o for o in a.option_strings if o.startswith("--") and o != "-" + s]  # --k is -k
            partner[s].add(longs[0] if longs else s)
    problems += [f"{s} stands for {sorted(v)}" for s, v in partner.items() if len(v) > 1]
    # a long name has one kind of value everywhere: the same action, the same type, overlapping choices
    for s, lst in uses.items():
        kinds = {(type(a).__name__, _type_name(a)) for _, a in lst}
        if len(kinds) > 1:
            problems.append(f"{s}: {sorted(kinds)} in {[c for c, _ in lst]}")
        choice_sets = [(c, set(a.choices)) for c, a in lst if a.choices]
        if s in CHOICES_OF_THE_COMMAND:
            continue
        for (c1, a1), (c2, a2) in zip(choice_sets, choice_sets[1:]):
            if not a1 & a2:
                problems.append(f"{s}: choices {sorted(a1)} ({c1}) and {sorted(a2)} ({c2}) share nothing")
    # the cross-cutting letters: their help says what the glossary says
    for s, (long_name, words) in GLOSSARY.items():
        for cmd, a in uses.get(s, []):
            if long_name not in a.option_strings:
                problems.append(f"{cmd} {s}: is not {long_name}")
            if not any(w in (a.help or "").lower() for w in words):
                problems.append(f"{cmd} {s}: help {a.help!r} does not say {words}")
    assert problems == [], "\n".join(problems)


def test_the_known_clashes_are_gone():
    uses = _uses()
    spmm = dict(uses["--features"])["run spmm"]
    assert spmm.type.__name__ == "positive_int" and "-f" in spmm.option_strings
    assert "--feature-file" in dict(uses)  # the H.npy of run spmm has its own name
    assert {c for c, _ in uses["--backend"]} & {"partition"} == set()   # partition's engine is --engine
    assert {c for c, _ in uses["--alpha"]} == {"run bfs", "run graph500"}  # analyze's α is --latency
    assert all(type(a).__name__ == "_StoreAction" for _, a in uses["--route"])


# ------------------------------------------------------------------ partition: gpmetis habits
@pytest.fixture()
def mtx(tmp_path):
    import networkx as nx
    g = nx.grid_2d_graph(6, 6)
    idx = {v: i for i, v in enumerate(g.nodes)}
    lines = [f"{idx[a] + 1} {idx[b] + 1}" for a, b in g.edges]
    p = tmp_path / "grid.mtx"
    p.write_text("%%MatrixMarket matrix coordinate pattern symmetric\n" + f"36 36 {len(lines)}\n" + "\n".join(lines) + "\n")
    return p


def test_partition_without_o_writes_graph_part_k(mtx, capsys):
    assert main(["partition", str(mtx), "-k", "4", "--model", "graph", "--engine", "block"]) == 0
    out = mtx.with_name("grid.mtx.part.4")
    assert out.is_file()
    err = capsys.readouterr().err
    assert str(out) in err and "no -o" in err
    part = np.loadtxt(out, dtype=np.int64)
    assert part.shape == (36,) and set(part.tolist()) == {0, 1, 2, 3}


def test_default_output_for_a_dataset_name_is_in_the_cwd(tmp_path, monkeypatch):
    from partplan.cli.partition import default_output
    monkeypatch.chdir(tmp_path)
    assert default_output("email-Enron", 16) == Path("email-Enron.part.16")  # not a file here: a dataset name
    (tmp_path / "sub").mkdir()
    g = tmp_path / "sub" / "g.graph"
    g.write_text("")
    assert default_output(str(g), 3) == g.with_name("g.graph.part.3")


def test_part_k_name_must_match_k(mtx, capsys):
    bad = mtx.with_name("grid.part.8")
    assert main(["partition", str(mtx), "-k", "4", "--model", "graph", "--engine", "block", "-o", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("partplan: error:") and "grid.part.8" in err[0] and "-k is 4" in err[0]
    assert not bad.exists()


def test_quiet_silences_progress_but_not_errors(mtx, capsys):
    assert main(["partition", str(mtx), "-k", "2", "--model", "graph", "--engine", "block", "-q",
                 "-o", str(mtx.with_name("q.part.2"))]) == 0
    assert capsys.readouterr().err == ""
    assert main(["analyze", str(mtx), "--partition", str(mtx.with_name("q.part.2")), "-q"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["analyze", str(mtx), "--partition", str(mtx.with_name("missing.part.2")), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("partplan: error:") and "missing.part.2" in err
    assert "PARTPLAN_QUIET" not in os.environ


def test_pt_partition_holding_edge_index_is_refused(mtx, tmp_path, capsys):
    torch = pytest.importorskip("torch")
    ei = torch.randint(0, 36, (2, 57))
    f = tmp_path / "node_map.pt"
    torch.save(ei, f)
    assert main(["analyze", str(mtx), "--partition", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected a 1-D node map, got shape (2, 57)" in err[0] and str(f) in err[0]


def test_a_command_without_its_subcommand_is_a_usage_error(capsys):
    """Every level that takes a subcommand refuses to go without one: one error line naming the
    choices, exit 2 (argparse's usage errors), not the help block with exit 1."""
    from tests.errlines import run_cli
    for path, p in iter_parsers(build_parser()):
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            continue
        rc, out, err = run_cli(list(path), capsys)
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and out == "", (path, rc, out, err)
        assert "is required: one of" in lines[0] and all(c in lines[0] for c in subs[0].choices), lines
