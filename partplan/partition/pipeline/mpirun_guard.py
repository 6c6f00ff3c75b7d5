"""The process between the ``--nprocs`` launcher and ``mpirun``: it stops mpirun with exactly one
SIGTERM, whatever ends the launcher.

Run as a script by path (``python -I mpirun_guard.py LAUNCHER_PID GRACE_S MPIRUN ARGS...``: the
standard library only, no import of partplan, one thread), by
:func:`partplan.partition.pipeline.distributed.distributed_partition`.

Why: mpirun removes its session folder (``$TMPDIR/ompi.*/pid.*``) and its ranks' shared-memory
segments (``vader_segment.*``) when one SIGTERM stops it; a second signal while it stops makes it
exit at once, leaving both. A parent-death signal set on mpirun itself arrives once per thread of
the launcher (the kernel sends it each time the child passes to another thread of the dying
process), so a killed launcher, which runs several threads, left both. This guard gets those
signals instead and sends mpirun one SIGTERM, then SIGKILL after GRACE_S seconds; mpirun's own
parent-death signal is SIGKILL, sent once (this process has one thread) if the guard itself is
killed. Exit status: mpirun's, or 128 + N when signal N ended it.
"""
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def _parent_death_signal(sig: int) -> None:
    # partplan._process.set_parent_death_signal, repeated: importing partplan here would load numpy
    # and its thread pools, and a guard with several threads would send mpirun's own parent-death
    # signal once per thread, as the multi-threaded launcher would
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):   # no libc prctl (not Linux): the launcher's own stop still works
        pass


def main(argv: list) -> int:
    launcher, grace, cmd = int(argv[0]), float(argv[1]), argv[2:]
    stops = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)     # held until the handlers are in place
    _parent_death_signal(signal.SIGTERM)
    stopping = os.getppid() != launcher     # the launcher died before the line above
    pid = os.fork()
    if pid == 0:
        try:
            _parent_death_signal(signal.SIGKILL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)   # the mask outlives exec
            os.execvp(cmd[0], cmd)
        except OSError as exc:
            os.write(2, f"partplan: error: cannot run {cmd[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    sent = []

    def kill(signum, frame):
        os.kill(pid, signal.SIGKILL)

    def stop(signum, frame):
        if not sent:            # one SIGTERM, however many signals arrive
            sent.append(signum)
            os.kill(pid, signal.SIGTERM)
            signal.signal(signal.SIGALRM, kill)
            signal.setitimer(signal.ITIMER_REAL, grace)

    for sig in stops:
        signal.signal(sig, stop)
    if stopping:
        stop(None, None)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)   # a signal that came meanwhile runs stop now
    _, status = os.waitpid(pid, 0)     # retried after each handler (PEP 475)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
