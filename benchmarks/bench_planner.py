"""Planner benchmark from a fresh clone: ``python benchmarks/bench_planner.py --quick --out bench-out``.

Same as ``partplan bench`` (all arguments are passed through); see
:mod:`partplan.bench.planner` for what is measured.
"""
import sys

from partplan.cli.main import main
from partplan.bench.script import run

if __name__ == "__main__":
    run(lambda: main(["bench", *sys.argv[1:]]))
