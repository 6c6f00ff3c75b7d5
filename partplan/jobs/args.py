"""argparse pieces the jobs (and the CLI's other commands) share: number
types that reject bad values with one clear line, and the options every
distributed job takes."""
from __future__ import annotations

import argparse
import math

from ..runtime.comm import BACKENDS
from ..runtime.kernels import CHOICES as KERNEL_CHOICES

DEVICE_CHOICES = ("cpu", "cuda")


def _number(text: str, kind, what: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    v = _number(text, int, "a positive integer")
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


#: the most timed or warm-up runs a job takes (`run spmm`, `topology probe`): each timed run keeps a
#: row of times, and a count past this failed with a memory error only after the processes started
MAX_REPEATS = 1_000_000


def int_range(lo: int, hi: int):
    """argparse type: an integer in [lo, hi] (a count whose upper end a later allocation or a
    library's C int would otherwise find, after the processes have started)."""
    def parse(text: str) -> int:
        v = _number(text, int, f"an integer in [{lo:,}, {hi:,}]")
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"expected an integer in [{lo:,}, {hi:,}], got {v}")
        return v
    parse.__name__ = f"int_{lo}_{hi}"
    return parse


def nonneg_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    v = _number(text, int, "an integer >= 0")
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {v}")
    return v


def nonneg_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    v = _number(text, float, "a number")
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return v


#: the longest a rank may wait for a peer, seconds (11.6 days): gloo and NCCL take their timeout in
#: milliseconds as a C int (2^31 ms is 24.8 days), and a longer value failed only after the processes
#: had started
MAX_TIMEOUT_S = 10 ** 6


#: the shortest peer timeout, seconds: torch.distributed keeps whole milliseconds and gloo refuses 0 ms
#: (a shorter one failed inside the first collective with gloo's "timeout_2.count() > 0")
MIN_TIMEOUT_S = 0.001


def timeout_seconds(text: str) -> float:
    """argparse type: a peer timeout, 0 (the default) or a finite number of seconds in
    [MIN_TIMEOUT_S, MAX_TIMEOUT_S]."""
    v = nonneg_float(text)
    if v > MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_TIMEOUT_S:,} seconds (11.6 days), got {text}")
    if 0 < v < MIN_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"expected 0 (the default) or at least {MIN_TIMEOUT_S:g} seconds (peers "
                                         f"wait whole milliseconds), got {text}")
    return v


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    v = _number(text, float, "a number")
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return v


def probability(text: str) -> float:
    """argparse type: a number in [0, 1] (a damping factor, a probability)."""
    v = _number(text, float, "a number")
    if not (0 <= v <= 1):
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text}")
    return v


def fraction(text: str) -> float:
    """argparse type: an imbalance / tolerance in [0, 10)."""
    v = _number(text, float, "a number")
    if not (0 <= v < 10):
        raise argparse.ArgumentTypeError(f"expected a number in [0, 10), got {text}")
    return v


def add_job_options(parser: argparse.ArgumentParser, *, kernels: bool = True) -> None:
    """The options every distributed job shares: --nprocs, --backend,
    --timeout, --threads and (``kernels``) --kernels, --device."""
    parser.add_argument("--nprocs", type=positive_int, metavar="N",
                        help="processes to start here (= the plan's ranks); omit under torchrun")
    parser.add_argument("--backend", choices=BACKENDS, default="gloo",
                        help="gloo (CPU, default), nccl (CUDA GPUs) or local (all ranks in this process)")
    parser.add_argument("--timeout", type=timeout_seconds, default=60.0, metavar="S",
                        help="seconds a rank waits for a peer before failing (default 60; 0 = the default); "
                             "a peer that hangs ends the job within about 2 x S + 30 s")
    parser.add_argument("--threads", type=positive_int, default=None, metavar="T",
                        help="torch/OpenMP threads per process (default 1 for the processes started here; under "
                             "torchrun: torchrun's OMP_NUM_THREADS)")
    if kernels:
        parser.add_argument("--kernels", choices=KERNEL_CHOICES, default="auto",
                            help="local compute kernels: torch (any device), native (numba / scipy, CPU) or "
                                 "auto (torch on CUDA, native on CPU; default); the report names the one used")
        parser.add_argument("--device", choices=DEVICE_CHOICES, default=None,
                            help="where the buffers live: cpu (default with gloo / local) or cuda (default with "
                                 "nccl; with --backend local every rank on one GPU; refused with gloo, whose "
                                 "all-to-all takes CPU tensors only)")


def job_config(args: argparse.Namespace, *keys: str) -> dict:
    """The shared part of a job's config from its parsed arguments (backend,
    timeout, kernels, device when present, ``progress``) plus ``keys`` of
    ``args`` as they are."""
    cfg = {"backend": args.backend, "timeout": float(args.timeout or 60.0)}
    if hasattr(args, "kernels"):
        cfg.update({"kernels": args.kernels, "device": args.device})
    if hasattr(args, "progress"):   # --progress: every line; -q: none; else one every few seconds
        cfg["progress"] = "throttled" if args.progress is None else bool(args.progress)
    cfg.update({k: getattr(args, k) for k in keys})
    return cfg
