"""What the fault tests read off a command: its one ``partplan: error:`` line, and the CLI run in
this process."""
from __future__ import annotations


def one_line(rc, err, code=2, *needles):
    """Exit ``code``, no traceback, exactly one ``partplan: error:`` line holding every needle;
    returns that line."""
    assert rc == code, (rc, err)
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("partplan: error:")]
    assert len(lines) == 1, err
    for s in needles:
        assert s in lines[0], (s, lines[0])
    return lines[0]


def run_cli(argv, capsys):
    """``partplan ARGV`` in this process: (exit code, stdout, stderr)."""
    from partplan.cli.main import main
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err
