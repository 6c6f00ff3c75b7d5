"""Faults seen from outside (issue #53): each case ends in exit 2 with one
``partplan: error:`` line naming the file, field, argument or variable (or
one ``partplan: interrupted`` line), never a traceback, a crash or a raw
escape sequence on the terminal."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from partplan.cli.main import main

PARTPLAN = [sys.executable, "-m", "partplan"]


def one_line(rc, err, code=2, *needles):
    assert rc == code, (rc, err)
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("partplan: error:")]
    assert len(lines) == 1, err
    for s in needles:
        assert s in lines[0], (s, lines[0])
    return lines[0]


def run_cli(argv, capsys):
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


# ----------------------------------------------------------------------------- (e) sizes from arguments
@pytest.mark.parametrize("spec", ["tree:1000000x1000000", "tree:4294967296x4294967296"])
def test_huge_topology_preset_is_refused_before_allocation(spec, capsys, monkeypatch):
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "64M")
    rc, out, err = run_cli(["topology", "show", spec], capsys)
    one_line(rc, err, 2, spec, "ranks", "memory budget")
    assert out == ""


def test_topology_preset_with_a_5000_digit_fanout_is_one_error(capsys):
    rc, _, err = run_cli(["topology", "show", "tree:" + "9" * 5000 + "x2"], capsys)
    one_line(rc, err, 2, "preset", "18 digits")


def test_matrix_topology_whose_fanouts_lie_is_refused_before_the_tree(tmp_path, capsys):
    import json
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"kind": "matrix", "cost": [[0, 1], [1, 0]], "fanouts": [1000000, 1000000]}))
    rc, _, err = run_cli(["topology", "show", f], capsys)
    one_line(rc, err, 2, "t.json", "fanouts")


# ----------------------------------------------------------------------------- (f) SOURCE_DATE_EPOCH
@pytest.mark.dist
def test_malformed_source_date_epoch_is_one_error_naming_it(tmp_path):
    """numpy's f2py reads the variable at import: the CLI checks it before importing anything."""
    bad = ["abc", "253402300800", "9" * 30, "1e9", " 12", "", "-1", "\x1b[31m"]
    code = ("import os, sys\nfrom partplan.cli.main import main\nres = []\n"
            "for v in sys.argv[1:]:\n"
            "    os.environ['SOURCE_DATE_EPOCH'] = v\n"
            "    res.append(str(main(['topology', 'show', 'tree:2x2'])))\n"
            "print(' '.join(res))\n")
    r = subprocess.run([sys.executable, "-c", code, *bad], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["2"] * len(bad), r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == len(bad) and "Traceback" not in r.stderr, r.stderr
    assert all(ln.startswith("partplan: error: SOURCE_DATE_EPOCH = ") for ln in lines)
    assert "\x1b" not in r.stderr and "\\x1b[31m" in lines[-1]
    ok = subprocess.run(PARTPLAN + ["topology", "show", "tree:2x2"], capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, SOURCE_DATE_EPOCH="253402300799"))
    assert ok.returncode == 0, ok.stderr


def test_source_date_epoch_sets_created_up_to_the_year_9999(tmp_path, monkeypatch):
    from partplan.plan.store import stamp_created
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "253402300799")
    m = {}
    stamp_created(m, None)
    assert m["created"] == "9999-12-31T23:59:59+00:00"
    from partplan.errors import PartplanError
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "253402300800")
    with pytest.raises(PartplanError, match="SOURCE_DATE_EPOCH"):
        stamp_created({}, None)
