"""The job registry: the one list of jobs that ``partplan run`` / ``partplan
train``, the launched workers and the docs read.

A :class:`Job` is a name, its command-line arguments, how its arguments
become a JSON-able config, the checks made before any process starts
(``prepare``), the function every process runs on a
:class:`~partplan.runtime.launch.WorkerContext` (``run``) and how its report
is shown. Every job runs the same way (:func:`partplan.jobs.execute`):
``prepare`` in the calling process, then ``run(ctx, cfg)`` on every process
of the job through :func:`partplan.runtime.launch.start` (here with the
local backend, on launched processes, or as one rank under torchrun). Jobs
register themselves when their family module is imported
(``register(Job(...))``); :data:`FAMILIES` lists those modules.

Adding a job: write ``partplan/jobs/<family>.py`` with the job's ``run`` and
``register(Job(...))``, and add the module's name to :data:`FAMILIES`
(docs/design/runtime.md, "Adding a job").
"""
from __future__ import annotations

import argparse
import importlib
import json
from dataclasses import dataclass, field
from typing import Callable

from ..errors import PartplanError

# family modules of this package, each registering its jobs on import (one line per family)
FAMILIES: tuple[str, ...] = ("spmm", "traversal", "analytics", "lp", "matching", "train", "probe", "build")

OUTPUT_KINDS = (None, "npy", "npz")
_SKIP = frozenset({"func", "job_name", "command", "job", "model", "json"})


def config_from_args(args: argparse.Namespace) -> dict:
    """The parsed arguments as a config dict (the default :attr:`Job.configure`):
    every option except the parser's own bookkeeping, plus ``job``."""
    return {k: v for k, v in vars(args).items() if k not in _SKIP}


def render_json(report: dict) -> str:
    """The default :attr:`Job.render`: the report as indented JSON."""
    return json.dumps(report, indent=1)


def report_ok(report: dict) -> str | None:
    """The default :attr:`Job.problem`: a line when the report says the run
    went wrong (``bytes_match`` or ``all_valid`` false), else None."""
    if report.get("all_valid") is False:
        return "some searches are INVALID"
    if report.get("bytes_match") is False:
        return "BYTES DIFFER between prediction and measurement"
    return None


@dataclass(frozen=True)
class Job:
    """One job.

    name : ``cfg["job"]`` and the subcommand (:attr:`subcommand`: ``partplan <command> <name>``).
    help : one line for the command's list; ``description`` / ``examples``
        fill its ``--help``.
    run : ``run(ctx, cfg) -> report | None`` — a module-level function: the
        work of the ranks this process holds (all of them on the local
        backend, one under torch.distributed); the leader (rank 0) returns
        the report, the others None.
    add_arguments : adds the job's options to its argparse parser (the
        shared ``--nprocs/--backend/--timeout/--threads`` and ``--json`` are
        added by :mod:`partplan.jobs.args` / the CLI).
    configure : parsed arguments -> JSON-able config; checks the options and
        raises :class:`~partplan.errors.PartplanError` before anything starts.
    render : report -> the human-readable text (``--json`` prints the report).
    problem : report -> a line for stderr when the run went wrong (exit 1), else None.
    output : the kind of the job's ``--output`` file: "npy", "npz" or None.
    command : the CLI command the job sits under ("run", "train"), or None
        when another command starts it (``topology probe``, ``plan --nprocs``).
    prepare : optional ``prepare(cfg, nprocs, threads) -> cfg``, run once in
        the calling process before any process starts: every check that can
        fail early (the plan, the inputs, the process count), and the config
        the processes get (keys it does not know kept).
    """

    name: str
    help: str
    run: Callable
    add_arguments: Callable[[argparse.ArgumentParser], None] = lambda parser: None
    configure: Callable[[argparse.Namespace], dict] = config_from_args
    render: Callable[[dict], str] = render_json
    problem: Callable[[dict], str | None] = report_ok
    output: str | None = None
    command: str | None = "run"
    description: str = ""
    examples: str = ""
    prepare: Callable[[dict, int | None, int | None], dict] | None = field(default=None)

    @property
    def subcommand(self) -> str:
        """The name under its command: ``<command>-<sub>`` is ``partplan <command> <sub>``
        (``train-gcn`` is ``partplan train gcn``), any other name is itself."""
        pre = f"{self.command}-"
        return self.name[len(pre):] if self.command and self.name.startswith(pre) else self.name

    def __post_init__(self):
        if self.output not in OUTPUT_KINDS:
            raise ValueError(f"job {self.name}: output must be one of {OUTPUT_KINDS}, got {self.output!r}")


_JOBS: dict[str, Job] = {}
_loaded = False


def register(job: Job) -> Job:
    """Add ``job`` to the registry (a name is registered once)."""
    if job.name in _JOBS and _JOBS[job.name] is not job:
        raise ValueError(f"job {job.name!r} is registered twice")
    _JOBS[job.name] = job
    return job


def unregister(name: str) -> None:
    """Remove a job (tests register toy jobs and take them out again)."""
    _JOBS.pop(name, None)


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for fam in FAMILIES:
            importlib.import_module(f"{__package__}.{fam}")


def jobs(command: str | None = "*") -> list[Job]:
    """The registered jobs in registration order; ``command`` "run" / "train"
    / None keeps the jobs under that command ("*": all)."""
    _load()
    return [j for j in _JOBS.values() if command == "*" or j.command == command]


def names(command: str | None = "*") -> list[str]:
    """Names of :func:`jobs` (``command`` as there)."""
    return [j.name for j in jobs(command)]


def get(name: str) -> Job:
    """The job called ``name``; a :class:`PartplanError` naming the known ones if none."""
    _load()
    if name not in _JOBS:
        raise PartplanError(f"unknown job {name!r} (known: {', '.join(sorted(_JOBS))})")
    return _JOBS[name]
