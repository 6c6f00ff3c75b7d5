"""``distributed_partition``: partition a graph with N MPI processes.

The partitioner past one machine runs as its own stage under ``mpirun -np N``
(the torch.distributed jobs never call MPI): every process reads only its
chunks of a chunked graph (:mod:`partplan.io.chunked`; a graph file is first
written as chunks into a temporary folder), runs the engine on its row block,
refines max(send, recv) (:mod:`partplan.partition.refinement.distributed`; a graph of at
most ``DistributedRefineContext.gather_max_pins`` pins (nonzeros + rows), 2²⁴ by default, is held
whole instead: process 0 refines the engine's partition by the single-process refinement, process 1
runs the single-process default pipeline, the better is kept), lowers the total volume without
raising it (:mod:`partplan.partition.refinement.km1_pass` in process 0 while its counts fit, else
:mod:`partplan.partition.refinement.distributed_volume` over every process's rows) and writes its
slice of the output ``.npy``. The launcher checks everything before it starts (packages, chunks,
output path, sizes), creates the output temporary, renames it into place
only when every process succeeded, and writes the JSON sidecar with the exact
figures, the engine, the process count and each stage's wall time and peak
RSS per process.

Engines (``engine=``): every entry of the engine registry with an ``mpi_run``
(:func:`partplan.partition.registry.mpi_engine_names`): ``"zoltan"`` (Zoltan PHG on
the column-net hypergraph: the exact volume), ``"ptscotch"`` (PT-Scotch on the
graph, symmetric patterns) and ``"stream"`` (the same streaming partitioner as in
one process, with the same options, in process 0 with O(n) state).
``partition(graph, k, nprocs=N)`` and ``partplan partition --nprocs N`` check their
arguments with :func:`partplan.partition.request.resolve` and land here. ``None``
chooses per graph (:func:`default_engine`: the stream on a hub-heavy graph whose largest
hub spans one to three parts, else Zoltan PHG when installed and n fits its 32-bit ids,
else PT-Scotch for a symmetric pattern, else the stream; ``docs/design/distributed.md``).

Example::

    partplan partition rmat20.chunked -k 64 --nprocs 2 -o rmat20.part.npy --json
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from ...errors import BackendUnavailableError, PartitionError, PartplanError
from ...graph import Graph
from ...io.partfile import SIDECAR_SCHEMA
from ..context import DistributedRefineContext
from ..engines import DEFAULT_MPI_ENGINE as DEFAULT_ENGINE
from ..engines import check_mpi_engine as check_request
from ..engines import RULE_ENGINES, get_backend
from ..options import DEFAULT_IMBALANCE

#: how to get the missing engines (the Makefile's target installs OpenMPI, Zoltan and PT-Scotch as root)
MAKE_HINT = "`make mpi` (as root)"


def installed_engines() -> set[str]:
    """The engines of the per-graph rule that can run here (the stream always can where MPI runs at
    all)."""
    return {name for name in RULE_ENGINES if not get_backend(name).mpi_needs()} | {"stream"}


def default_engine(stats: dict, installed: set[str] | None = None) -> tuple[str, str]:
    """(the engine no --engine runs, the reason) for a graph of figures ``stats``
    (:func:`.engine_rule.graph_stats`, with k; the processes compute them from the degree
    histograms of the rows they read, combined): :func:`.engine_rule.choose_engine` over the MPI
    engines installed here — the stream on a hub-heavy graph whose largest hub spans one to three
    parts (as-22july06, k = 16: Zoltan's start stalls the refinement at 1.85x the single-process
    max, the stream's ends at 0.99x), else Zoltan PHG, else PT-Scotch for a symmetric pattern, else
    the stream (docs/design/distributed.md)."""
    from .engine_rule import choose_engine
    return choose_engine(stats, installed_engines() if installed is None else installed)


def missing_zoltan_warning() -> str | None:
    """The one stderr line when Zoltan cannot run here (None when it can)."""
    from ..engines.mpilibs import INSTALL_HINT
    if "zoltan" in installed_engines():
        return None
    return (f"partplan: warning: Zoltan is not installed, so --nprocs chooses among the other engines (PT-Scotch, "
            f"the stream); install Zoltan with {MAKE_HINT} or {INSTALL_HINT}")


def mpirun_command(nprocs: int) -> list[str]:
    """``mpirun`` for N processes on this machine (oversubscribed, shared memory
    only, not bound to cores: OpenMPI binds each of up to two processes to one core,
    and on a graph that fits process 1 runs the single-process pipeline, whose lanes
    use every core once process 0 waits); ``$PARTPLAN_MPIRUN`` replaces it (e.g. a
    hostfile for a cluster)."""
    given = os.environ.get("PARTPLAN_MPIRUN")
    if given:
        return given.split() + ["-np", str(nprocs)]
    return ["mpirun", "-np", str(nprocs), "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader"]


# What an MPI launcher or an initialised MPI (a singleton, e.g. mpi4py in this
# process) leaves in the environment for its own processes: PMIx's job keys, the
# job's OMPI_* figures and the MCA keys that tie a process to its job. Passed on,
# they make the nested ``mpirun`` join the caller's job instead of starting its
# own, and it exits with status 1 before any rank runs. A user's MCA settings
# (OMPI_MCA_*, PMIX_MCA_* of any other name) stay.
_LAUNCHER_ENV = re.compile(r"^(PMIX_(?!MCA_)|PMI_"
                           r"|OMPI_MCA_(ess|pmix|initial_wdir|orte_launch|orte_precondition_transports"
                           r"|orte_hnp_uri|orte_local_daemon_uri)$|OMPI_MCA_(ess_base|orte_ess)_"
                           r"|OMPI_(?!MCA_|ALLOW_RUN_AS_ROOT))")


def _env() -> dict:
    env = {key: value for key, value in os.environ.items() if not _LAUNCHER_ENV.match(key)}
    if hasattr(os, "geteuid") and os.geteuid() == 0:   # OpenMPI refuses root without these
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    src = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


#: seconds mpirun gets after SIGTERM (it stops its ranks and removes its shared-memory segments and
#: session folder) before it is killed
MPIRUN_GRACE_S = 5.0


#: seconds the launcher waits for the guard beyond MPIRUN_GRACE_S (the guard kills mpirun first)
GUARD_EXTRA_S = 2.0


def guarded(cmd: list[str]) -> list[str]:
    """``cmd`` (an mpirun command line) run by :mod:`.mpirun_guard`, which stops mpirun with one
    SIGTERM when this process stops it or dies, and kills it MPIRUN_GRACE_S seconds later."""
    from . import mpirun_guard
    return [sys.executable, "-I", mpirun_guard.__file__, str(os.getpid()), str(MPIRUN_GRACE_S)] + list(cmd)


def stop_mpirun(proc: subprocess.Popen, grace: float = MPIRUN_GRACE_S + GUARD_EXTRA_S) -> None:
    """Stop a running ``mpirun`` (or its :func:`guarded` command): SIGTERM, which mpirun forwards to
    its ranks before it removes what it made (its shared-memory segments,
    ``/dev/shm/vader_segment.*``, and its session folder, ``$TMPDIR/ompi.*/pid.*``, 8 MiB each,
    which a SIGKILL leaves behind), then SIGKILL after ``grace`` seconds or when this wait is itself
    interrupted. Returns once it has ended."""
    if proc.poll() is not None:
        return
    try:
        proc.terminate()
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _reason(lines: list[str], rc: int) -> str:
    """A rank's one error line, else the last line of mpirun's that says something."""
    errs = [ln for ln in lines if "partplan: error: " in ln]
    if errs:   # one rank's line (mpirun can join two ranks' lines into one: the first is kept)
        return errs[0].split("partplan: error: ")[1].strip()
    said = [ln.strip() for ln in lines if any(ch.isalnum() for ch in ln)]
    return said[-1] if said else f"exit status {rc}"


def refuse_vertex_weights(graph) -> None:
    """One PartitionError for a :class:`Graph` with vertex weights: the distributed partitioner
    balances row nonzeros (its chunks carry no vertex weights), so it would ignore them."""
    if isinstance(graph, Graph) and graph.vertex_weights is not None:
        raise PartitionError(f"{graph.name or 'the graph'} has vertex weights; the distributed partitioner "
                             f"(--nprocs) balances row nonzeros and cannot keep them: partition it in one "
                             f"process (without --nprocs)")


def distributed_partition(graph, k: int, *, nprocs: int, output, engine: str | None = None,
                          imbalance: float = DEFAULT_IMBALANCE, seed: int = 0, refine: bool = True,
                          context: DistributedRefineContext | None = None, engine_options: dict | None = None,
                          quiet: bool = False, timeout_s: float | None = None, progress=None, f: int = 128,
                          dtype: str = "float32") -> dict:
    """Partition ``graph`` (a chunked graph directory, a graph file or a
    :class:`~partplan.graph.Graph`; the last two are written as chunks into a
    temporary folder first) for
    ``k`` ranks with ``nprocs`` MPI processes; write the partition to
    ``output`` (``.npy``, int64[n]) and its sidecar ``output.json``. Returns
    the sidecar's dict: exact send / recv / compute load per part, the
    engine's figures before the refinement, stages (wall s, peak RSS bytes per
    process). ``context``: the distributed refinement's (None: its defaults); ``engine_options``:
    the engine's own, as its context names them (an explicit ``engine`` only). ``f`` / ``dtype``: the
    width and type of a row of H the figures' bytes and time estimate are for."""
    from ..._atomic import atomic_path, clean_stale, commit, create_npy, discard_temp, make_temp_dir, write_error
    from ...io.chunked import chunk_info, is_chunked, write_chunked
    from ...io.outpath import check_output_file

    engine = check_request(engine, nprocs, k, engine_options)
    from ...metrics.cost import check_width, dtype_name
    f, dtype = check_width(f), dtype_name(dtype)
    ctx = DistributedRefineContext(seed=seed) if context is None else context
    if not isinstance(ctx, DistributedRefineContext):
        raise PartitionError(f"context must be a DistributedRefineContext, got {type(ctx).__name__}")
    out = Path(output)
    if out.suffix.lower() != ".npy":
        raise PartitionError(f"{out}: the distributed partitioner writes a .npy partition (each process writes "
                             f"its rows); name the output NAME.npy")
    check_output_file(out, kind="partition")
    clean_stale(out)    # the work folder and reserved .npy of runs killed before they ended (by their lock)
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    work = make_temp_dir(out)   # beside the output, locked and swept like every partplan temporary
    tmp = None
    fingerprint = None     # the graph's, when it was in memory here (a chunked graph is never read whole here)
    try:
        if not isinstance(graph, Graph) and is_chunked(graph):
            path = Path(graph)
        else:
            if isinstance(graph, Graph):
                g = graph
            else:
                from ...io import read_graph
                say(f"reading {graph}")
                g = read_graph(graph)
            refuse_vertex_weights(g)
            if k > g.n:
                raise PartitionError(f"-k {k} is more than the graph's {g.n} vertices")
            if nprocs > g.n:
                raise PartitionError(f"--nprocs {nprocs} is more than the graph's {g.n} rows (each process "
                                     f"partitions a block of at least one row): use at most {max(g.n, 1)}")
            path = work / "graph.chunked"
            write_chunked(g, path, chunks=max(1, min(max(4 * nprocs, 8), g.n)))   # no chunk without a row
            fingerprint = g.fingerprint
            del g
        info = chunk_info(path)
        hashing = None
        if k > info.n:
            raise PartitionError(f"-k {k} is more than the graph's {info.n} vertices")
        if len(info.chunks) < nprocs:
            raise PartitionError(f"{path}: {len(info.chunks)} chunks for {nprocs} processes; the processes split "
                                 f"the graph by chunks (rewrite it with at least {nprocs} chunks)")
        if engine == DEFAULT_ENGINE:    # chosen per graph by the processes (default_engine); no Zoltan: said once
            why = missing_zoltan_warning()
            if why:
                print(why, file=sys.stderr, flush=True)
        if engine == "zoltan":
            from ..engines.zoltan import MAX_N
            if info.n > MAX_N:
                raise PartitionError(f"{path}: n = {info.n} exceeds Zoltan's 32-bit global ids here; "
                                     f"use --engine ptscotch or stream")
        from dataclasses import asdict
        tmp, ident = create_npy(out, "<i8", (info.n,))
        report = work / "report.json"
        cfg = {"graph": str(path), "k": int(k), "imbalance": float(imbalance), "seed": int(seed),
               "engine": engine, "engine_options": dict(engine_options or {}), "refine": bool(refine),
               "refine_context": asdict(ctx),
               "tmp": str(tmp), "ident": list(ident), "report": str(report), "quiet": bool(quiet),
               "f": int(f), "dtype": dtype}
        try:
            (work / "config.json").write_text(json.dumps(cfg))
        except OSError as exc:   # a full disk beside the output: one error naming the output
            raise write_error(out, exc) from None
        cmd = guarded(mpirun_command(nprocs) + [sys.executable, "-m", "partplan.partition.pipeline.mpi_worker",
                                                str(work / "config.json")])
        say(f"running the partitioner ({'chosen per graph' if engine == DEFAULT_ENGINE else engine}) on {nprocs} "
            f"MPI processes")
        if fingerprint is None:   # a chunked graph's, streamed beside the job (hashlib releases the GIL)
            from ...io.chunked import chunked_fingerprint
            from .lanes import Lanes
            hashing = Lanes(2).submit(chunked_fingerprint, path, info=info)
        # mpirun (behind its guard) in its own session: a terminal's Ctrl-C (SIGINT to the whole
        # foreground group) reaches this process alone, which stops mpirun with one SIGTERM
        # (stop_mpirun) so that it removes its session folder and shared-memory segments; a SIGINT
        # of its own ended it without that. Where this process dies without stopping it (SIGKILL),
        # the guard gets SIGTERM (the parent-death signal it sets itself, then checks that this
        # process is still its parent) and stops mpirun the same way.
        proc = subprocess.Popen(cmd, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True)
        lines: list[str] = []

        def pump():   # progress lines through, the rest kept for the error message
            for line in proc.stderr:
                lines.append(line.rstrip("\n"))
                if line.startswith("partplan: ") and not line.startswith("partplan: error") and not quiet:
                    print(line, end="", file=sys.stderr, flush=True)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_mpirun(proc)
            raise PartitionError(f"the distributed partitioner ({engine}, {nprocs} processes) did not finish "
                                 f"within {timeout_s} s; stopped") from None
        except BaseException:
            stop_mpirun(proc)
            raise
        finally:
            reader.join(timeout=5)
            if not reader.is_alive():
                proc.stderr.close()     # read to its end by pump (else a ResourceWarning at collection)
        if rc != 0 or not report.is_file():
            raise PartitionError(f"the distributed partitioner ({engine}, {nprocs} processes) failed: "
                                 f"{_reason(lines, rc)}")
        result = json.loads(report.read_text())
        load = result["compute_load"]
        mean = sum(load) / len(load) if load else 0.0
        engine = result["engine"]
        gathered = result.get("gathered")
        if isinstance(gathered, dict) and gathered["kept"] == "pipeline":   # the single-process default's partition
            model, backend = "graph", f"default pipeline ({gathered['pipeline']['chosen']} start; beside {engine}+refine)"
        else:
            model, backend = get_backend(engine).models[0], (f"{engine}+refine" if refine else engine)
        result.update(schema=SIDECAR_SCHEMA, k=int(k), ranks=int(k), row_blocks=int(k), ownership="conformal",
                      layout="1d", layout_params={},
                      model=model, objective="max-both",
                      timings={f"{name}_s": max(s[name]["wall_s"] for s in result["stages"])
                               for name in result["stages"][0]}, backend=backend,
                      graph=graph.name if isinstance(graph, Graph) else str(graph), output=str(out), wall_s=round(time.perf_counter() - t0, 3),
                      compute_imbalance=(max(load) / mean - 1.0) if mean > 0 else 0.0)
        result["params"] = {"imbalance": float(imbalance), "seed": int(seed), "nprocs": int(nprocs), "engine": engine,
                            **dict(engine_options or {})}
        if hashing is not None:
            try:
                fingerprint = hashing.result()
            except (OSError, ValueError, PartplanError):   # the graph changed under the job: no fingerprint
                fingerprint = None
        if fingerprint is not None:
            result["graph_fingerprint"] = fingerprint
        # the sidecar is written to its temporary before the partition replaces the output, and
        # replaces its own name after it: a full disk keeps the previous pair
        with atomic_path(out.with_name(out.name + ".json")) as side:
            side.write_text(json.dumps(result, indent=1) + "\n")
            commit(tmp, out, ident)
            tmp = None
        return result
    finally:
        if tmp is not None:
            discard_temp(tmp)
        discard_temp(work)


def sidecar_stats(res: dict) -> dict:
    """The figures of a ``--nprocs`` result (its sidecar ``res``) under the names
    :meth:`partplan.metrics.CommStats.summary` gives them, so a script reads
    ``stats["total_volume"]`` from either partitioner's JSON: the processes' final count
    (``res["stats"]``: every figure of the summary; at k above 2,048 the per-part figures alone,
    with ``stats_note`` naming what is left out), or, for a sidecar without it, the figures the
    per-part recount gives (k, n, nnz, total_volume, max_send, max_recv, mean_volume,
    send_imbalance, recv_imbalance, compute_imbalance, max_compute_load; rows of H and row
    nonzeros).

    >>> sidecar_stats({"k": 2, "n": 4, "nnz": 8, "send": [1, 3], "recv": [2, 2], "compute_load": [2, 6]})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'k': 2, 'n': 4, 'nnz': 8, 'total_volume': 4, 'max_send': 3, 'max_recv': 2, 'mean_volume': 2.0,
     'send_imbalance': 0.5, 'recv_imbalance': 0.0, 'compute_imbalance': 0.5, 'max_compute_load': 6}
    """
    from ...metrics.stats import per_part_summary
    if isinstance(res.get("stats"), dict):
        return dict(res["stats"])
    return per_part_summary(res["k"], res["n"], res["nnz"], res["send"], res["recv"], res["compute_load"])


__all__ = ["distributed_partition", "mpirun_command", "sidecar_stats", "DEFAULT_ENGINE"]
