"""Entry point of a launched worker: ``python -m partplan.runtime.worker CONFIG.json``.

Runs the job named by ``config["job"]`` (``spmm``) on this rank; rank 0
writes the report to ``config["result"]``. A user error ends with one line
``partplan: error: ...`` on stderr and exit status 2.
"""
from __future__ import annotations

import json
import sys

from ..errors import PartplanError


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as fh:
        cfg = json.load(fh)
    try:
        from .spmm import spmm_worker
        spmm_worker(cfg)
    except PartplanError as exc:
        print(f"partplan: error: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
