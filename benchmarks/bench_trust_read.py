"""Cost of the reader checks on a plan: the Arrow footer / batch-header read
(partplan/io/arrowcheck.py) and the full validation of each shard's batch, against
the plain read (load_plan with those two checks stubbed out), interleaved in
one process, files in the page cache.

Usage: python benchmarks/bench_trust_read.py PLAN [REPEATS] [noverify]
(``noverify``: the read without the sha256 of each file).
"""
import argparse
import time

import numpy as np

from partplan.io import arrowcheck
from partplan.plan import load_plan, store
from partplan.bench.script import add_json_option, check_json_output, run, write_json

_ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
_ap.add_argument("plan", help="a plan directory")
_ap.add_argument("repeats", nargs="?", type=int, default=7, help="interleaved repeats (7)")
_ap.add_argument("verify", nargs="?", choices=["verify", "noverify"], default="verify",
                 help="noverify: the read without each file's sha256")
add_json_option(_ap)
_args = _ap.parse_args()
if _args.repeats < 1:
    _ap.error("REPEATS must be >= 1")
path, reps, VERIFY = _args.plan, _args.repeats, _args.verify != "noverify"
real_batches = store.ipc_batches
real_ipc = store.ipc


class _NoValidate:
    def __init__(self, b):
        self._b = b

    def validate(self, full=False):
        return None

    def __getattr__(self, k):
        return getattr(self._b, k)


class _Reader:
    def __init__(self, r):
        self._r = r

    def get_batch(self, i):
        return _NoValidate(self._r.get_batch(i))

    def __getattr__(self, k):
        return getattr(self._r, k)


class _Ipc:
    @staticmethod
    def open_file(buf):
        return _Reader(real_ipc.open_file(buf))


def stub_batches(buf):
    return [arrowcheck.BatchInfo(1, False, 0, 0)]


def timed(check: bool) -> float:
    store.ipc_batches = real_batches if check else stub_batches
    store.ipc = real_ipc if check else _Ipc
    try:
        t0 = time.perf_counter()
        load_plan(path, verify=VERIFY)
        return time.perf_counter() - t0
    finally:
        store.ipc_batches = real_batches
        store.ipc = real_ipc


def main() -> None:
    check_json_output(_args.json)
    load_plan(path)   # warm the page cache and imports
    plain, checked = [], []
    for _ in range(reps):
        plain.append(timed(False))
        checked.append(timed(True))
    p, c = float(np.median(plain)), float(np.median(checked))
    print(f"verify={VERIFY} median of {reps}: read without the added checks {p * 1e3:.1f} ms, with them {c * 1e3:.1f} ms, "
          f"added {(c - p) * 1e3:.2f} ms = {100 * (c - p) / p:.2f} % of the read")
    # the checks alone, timed directly
    t0 = time.perf_counter()
    for r in range(4):
        m = store._Mapped(store.Path(path) / f"rank-{r:05d}.arrow", "shard")
        real_batches(m.buf)
        store.ipc.open_file(m.buf).get_batch(0).validate(full=True)
    alone = time.perf_counter() - t0
    print(f"ipc_batches + validate(full=True) on the 4 shards alone: {alone * 1e3:.2f} ms")
    write_json(_args.json, {"verify": VERIFY, "repeats": reps, "read_median_s": p, "checked_read_median_s": c,
                            "added_share": (c - p) / p, "checks_alone_s": alone})


if __name__ == "__main__":
    run(main)
