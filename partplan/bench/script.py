"""What every script under ``benchmarks/`` does with bad input: one line and exit 2.

A benchmark script parses its options with argparse (the count options take
:func:`partplan.jobs.args.positive_int` and friends, so ``--repeats 0`` is argparse's own one
line) and hands its ``main`` to :func:`run`: a value the library refuses (a
:class:`~partplan.errors.PartplanError`: ``--k 0``, a generator's ``--scale 99``, a missing
file) is then ``SCRIPT: error: MESSAGE`` on stderr and exit 2, never a traceback.

>>> def main():
...     from partplan.errors import PartitionError
...     raise PartitionError("k must be >= 1, got 0")
>>> try:
...     run(main, name="bench_x.py")
... except SystemExit as exc:
...     exc.code
2
"""
from __future__ import annotations

import os
import sys
from typing import Callable


def run(main: Callable[[], int | None], *, name: str | None = None) -> None:
    """Call ``main()`` and exit with its status (None: 0); a PartplanError or an OSError (a file
    the user named that cannot be read or written) is one line ``NAME: error: MESSAGE`` on stderr
    and exit 2. ``name``: the script's name (default: ``sys.argv[0]``'s)."""
    from ..errors import PartplanError

    name = name or os.path.basename(sys.argv[0] or "benchmark")
    try:
        rc = main()
    except (PartplanError, OSError) as exc:
        print(f"{name}: error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr, flush=True)
        raise SystemExit(130) from None
    raise SystemExit(0 if rc is None else int(rc))


def add_json_option(ap) -> None:
    """The ``--json FILE`` option every benchmark script takes: what its tables print, as JSON."""
    ap.add_argument("--json", metavar="FILE", default=None,
                    help="also write the results as JSON to FILE (written at the end; a failed run keeps "
                         "the previous FILE)")


def check_json_output(path) -> None:
    """A ``--json`` path that cannot be written is one error before any measurement (None: no file)."""
    if path is not None:
        from ..io.outpath import check_output_file
        check_output_file(path)


def write_json(path, results: dict, argv=None) -> None:
    """``results`` with the command that made them (the script's arguments: ``argv``, else the
    process's), written atomically to ``path`` (None: nothing)."""
    if path is None:
        return
    import shlex

    from .._atomic import write_json_atomic
    from .._files import json_default
    args = sys.argv[1:] if argv is None else [str(a) for a in argv]
    cmd = "python " + shlex.join(["benchmarks/" + os.path.basename(sys.argv[0]), *args])
    write_json_atomic({"command": cmd, **results}, path, default=json_default)



