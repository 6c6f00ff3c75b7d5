"""``partplan`` console script: a thin argparse layer over the Python API.

Each command lives in its own module of this package exposing
``register(subparsers)``; the parser it adds sets ``func(args) -> int``.
Every :class:`partplan.errors.PartplanError` is printed as one line
(``partplan: error: ...``) with exit status 2, never as a traceback.

``-q/--quiet`` is added here to every command and subcommand that does not
define it (:func:`add_quiet_everywhere`): it sets ``PARTPLAN_QUIET=1`` (the
compile notice, launched ranks) and, while the command runs, drops stderr
lines other than errors and warnings (progress, heartbeats, "wrote ...").
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import io
import os
import sys

from partplan import __version__
from partplan.errors import PartplanError

# command modules, in --help order; a module absent from this install is skipped
COMMANDS = ["analyze", "partition", "plan", "shares", "run", "train", "validate", "inspect", "export", "datasets",
            "convert", "bench",
            "demo", "topology"]


class Parser(argparse.ArgumentParser):
    """argparse with one line per error (exit 2), as every other error of the CLI: the option's
    problem and where the usage is, not the whole usage block first. Subcommands' parsers are of
    the same class (argparse builds them from their parent's). Options are never abbreviated: a
    prefix such as ``--k`` would silently be read as the one option it begins (``--kahypar-ini``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, None if _torchrun_peer() else f"partplan: error: {message} (usage: {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but arguments no subcommand takes are named with that subcommand's help
        (``partplan run spmm --help``, not ``partplan --help``)."""
        ns, extras = self.parse_known_args(args, namespace)
        chosen = _chosen(self, ns)
        if extras:
            self.exit(2, None if _torchrun_peer() else f"partplan: error: unrecognized arguments: "
                                                       f"{' '.join(extras)} (usage: {chosen.prog} --help)\n")
        for action in chosen._actions:   # an empty value ("" from a script's unset variable) means nothing
            if not action.option_strings or action.default == "":   # (positionals say it their own way)
                continue
            v = getattr(ns, action.dest, None)
            if v == "" or (isinstance(v, list) and "" in v):
                if _torchrun_peer():
                    self.exit(2)
                from partplan.errors import OptionError   # the command's exit 2, one line (main)
                raise OptionError(f"argument {'/'.join(action.option_strings)}: an empty value (usage: "
                                  f"{chosen.prog} --help)")
        return ns


def _torchrun_peer() -> bool:
    """A torchrun rank other than 0: a usage error is said once, by rank 0 — every rank parses the
    same arguments, the others exit 2 without the line (torchrun still reports each rank's exit)."""
    import os
    return bool(os.environ.get("TORCHELASTIC_RUN_ID")) and os.environ.get("RANK", "0") != "0"


def _chosen(parser: argparse.ArgumentParser, ns) -> argparse.ArgumentParser:
    """The innermost subcommand's parser that ``ns`` went through (``partplan run spmm``'s)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            name = getattr(ns, action.dest, None) if action.dest != argparse.SUPPRESS else None
            if isinstance(name, str) and name in action.choices:
                return _chosen(action.choices[name], ns)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="partplan",
        description="Partition graphs and plan the communication of distributed SpMM / GNN / BFS jobs.")
    parser.add_argument("--version", action="version", version=f"partplan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"partplan.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"partplan.cli.{name}":
                continue
            raise
        mod.register(sub)
    from partplan.cli._common import require_subcommand
    require_subcommand(parser, sub, "a command")
    add_quiet_everywhere(parser)
    return parser


def iter_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) of ``parser`` and every subcommand below it, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen = set()
            for name, sp in action.choices.items():
                if id(sp) in seen:  # aliases
                    continue
                seen.add(id(sp))
                yield from iter_parsers(sp, path + (name,))


def add_quiet_everywhere(parser: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` on every command and subcommand that lacks it (one meaning:
    no progress on stderr). Every subcommand's ``-q`` (added here or its own)
    has ``default=SUPPRESS``, so a ``-q`` given before the subcommand
    (``partplan -q partition ...``) is not reset by it; the top-level parser's
    default (False) is what a command sees without any ``-q``."""
    for path, p in iter_parsers(parser):
        own = [a for a in p._actions if "--quiet" in a.option_strings]
        if own:
            if path:  # a command's own -q: never resets a -q given before the command (partplan -q CMD)
                for a in own:
                    a.default = argparse.SUPPRESS
            continue
        p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS if path else False,
                       help="no progress messages on stderr (errors and warnings still shown)")


class _QuietStderr(io.TextIOBase):
    """stderr under ``-q``: complete lines pass only when they carry an error or
    a warning; the rest (progress, heartbeats, "wrote ...") is dropped."""

    def __init__(self, real):
        self.real, self._buf = real, ""

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            low = line.lower()
            if "error" in low or "warning" in low or "traceback" in low or low.startswith("partplan: interrupted"):
                self.real.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.real.flush()

    def fileno(self) -> int:
        return self.real.fileno()

    def isatty(self) -> bool:
        return False


class _Escaping(io.TextIOBase):
    """stdout / stderr while a command runs: every control character but the
    newline and the tab (ANSI escapes, carriage returns, bidi overrides) and
    every lone surrogate is written as a backslash escape
    (:func:`partplan.io.trust.printable`'s rule), so a name from the command
    line or a file is shown, never obeyed, wherever it is printed (``ls`` and
    git show names the same way). partplan itself prints no control character."""

    def __init__(self, real):
        self.real = real

    def write(self, text: str) -> int:
        self.real.write(_escape_text(text))
        return len(text)

    def flush(self) -> None:
        self.real.flush()

    def fileno(self) -> int:
        return self.real.fileno()

    def isatty(self) -> bool:
        return self.real.isatty()

    @property
    def encoding(self):
        return getattr(self.real, "encoding", "utf-8")


def _escape_text(text: str) -> str:
    from partplan.errors import _CONTROL
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda mt: mt.group(0) if mt.group(0) in "\n\t"
                        else mt.group(0).encode("unicode_escape").decode("ascii"), text)


class _Terminated(BaseException):
    """SIGTERM / SIGHUP outside a launch (the launcher handles them while its
    workers run): unwinds like Ctrl-C, so temporary outputs are removed."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum, frame):
    raise _Terminated(signum)


def _install_signal_handlers() -> dict:
    """SIGTERM / SIGHUP → :class:`_Terminated` (main thread only); returns the old handlers."""
    import signal
    import threading
    old = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                old[sig] = signal.signal(sig, _raise_terminated)
            except (ValueError, OSError):  # pragma: no cover
                pass
    return old


def _check_environment() -> None:
    """Environment variables that libraries read at import time, checked before
    any of them is imported: ``SOURCE_DATE_EPOCH`` (numpy's f2py, imported by
    scipy, raises a traceback on a malformed value)."""
    from partplan._env import check_environment
    check_environment()


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit
    status. As the process's entry (``argv`` None: the console script,
    ``python -m partplan``) an error or an interrupt leaves through
    :func:`_exit_now`, after its one line is flushed."""
    real_stdout, real_stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Escaping(real_stdout), _Escaping(real_stderr)   # argparse's own messages too
    try:
        rc = _main(argv)
    finally:
        sys.stdout, sys.stderr = real_stdout, real_stderr
    if argv is None and (rc not in (0, 1) or "torch.distributed" in sys.modules):
        # a process that ran torch.distributed (a torchrun rank, a job's launcher) ends as the
        # launched workers do: its atexit handlers run, the C++ destructors do not (a gloo thread
        # torn down there can end a rank with SIGABRT after its report, as in torchrun `train gcn`)
        if rc in (0, 1):
            import atexit
            atexit._run_exitfuncs()
        _exit_now(rc)
    if argv is None:
        # the process ends here: leave the objects alive now (numba's type registry, the imported
        # modules) out of the interpreter's collections at exit, which traverse them all (~0.45 s
        # CPU of a 1.5 s `partplan partition ... --engine metis` run); refcounted objects are
        # still freed and atexit handlers still run
        import gc
        gc.freeze()
    return rc


def _exit_now(code: int) -> None:
    """Leave without running C++ static destructors (as launched workers do,
    :func:`partplan.runtime.worker._exit_now`): a native library's thread torn
    down at interpreter exit (torch, TBB, gloo) can end a process that already
    printed its one error line with ``terminate called without an active
    exception`` (SIGABRT), seen after a hostile DGL partition file was refused.
    Every output is written or removed and stdout / stderr flushed before this. The one
    temporary an exit handler would remove is removed here: multiprocessing's own folder
    (``pymp-*``, its fork server's socket folder, which an interrupted job would leave in $TMPDIR)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # a closed pipe: nothing more can be said
            pass
    mp = sys.modules.get("multiprocessing.process")
    folder = getattr(mp.current_process(), "_config", {}).get("tempdir") if mp is not None else None
    if folder:
        import shutil
        shutil.rmtree(folder, ignore_errors=True)
    os._exit(code)


@contextlib.contextmanager
def _partplan_warnings(stderr):
    """Within the block, a :class:`partplan.errors.PartplanWarning` is one ``partplan: warning:``
    line on ``stderr`` (shown under ``-q`` too), each message once; other warnings as Python shows them."""
    import warnings

    from partplan.errors import PartplanWarning

    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, PartplanWarning):
                print(f"partplan: warning: {message}", file=stderr, flush=True)
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        warnings.simplefilter("default", PartplanWarning)
        yield


#: errors of the operating system about a path given to a command (answered as one error line)
_PATH_ERRNOS = frozenset(getattr(errno, name) for name in (
    "ENAMETOOLONG", "ENOENT", "ENOTDIR", "EISDIR", "EACCES", "EPERM", "EROFS", "ENOSPC", "EDQUOT", "ELOOP",
    "EXDEV", "ETXTBSY", "EFBIG") if hasattr(errno, name))


def _users_path_error(exc: OSError) -> bool:
    """Whether ``exc`` is the system refusing a user's path (one error line): one of
    :data:`_PATH_ERRNOS` naming a path outside the installed software (partplan's package, the
    interpreter's prefix) — a missing or unreadable file there is a fault of the install or of
    partplan, and keeps its traceback."""
    if exc.filename is None or exc.errno not in _PATH_ERRNOS:
        return False
    try:
        where = os.path.realpath(os.fsdecode(exc.filename))
    except (TypeError, ValueError):
        return False
    import partplan
    installed = {os.path.realpath(d) for d in (os.path.dirname(partplan.__file__), os.path.dirname(__file__),
                                                sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return not any(where == d or where.startswith(d + os.sep) for d in installed)


def _from_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while a KeyboardInterrupt was being handled or because of one (a
    compiled function that met Ctrl-C returns as a SystemError with the interrupt as its context)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _out_of_memory(exc: BaseException) -> bool:
    """A MemoryError (numpy's allocation failures among them), or torch's allocators' RuntimeError
    (host: "can't allocate memory"; CUDA: torch.cuda.OutOfMemoryError, "out of memory")."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return type(exc).__name__ == "OutOfMemoryError" or "can't allocate memory" in text or "out of memory" in text


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:300]


def _main(argv: list[str] | None = None) -> int:
    try:   # Ctrl-C while the commands are imported (numba's, the engines'): the one line, as later
        _check_environment()
        parser = build_parser()
        args = parser.parse_args(argv)
    except PartplanError as exc:
        print(f"partplan: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("partplan: interrupted", file=sys.stderr)
        return 130
    real_stderr, quiet_env = sys.stderr, os.environ.get("PARTPLAN_QUIET")   # escaping already (main)
    if getattr(args, "quiet", False):
        os.environ["PARTPLAN_QUIET"] = "1"  # the compile notice; ranks started by the launcher inherit it
        sys.stderr = _QuietStderr(real_stderr)
    old_handlers = _install_signal_handlers()
    try:
        with _partplan_warnings(real_stderr):
            return int(args.func(args) or 0)
    except PartplanError as exc:
        print(f"partplan: error: {exc}", file=real_stderr)
        return 2
    except KeyboardInterrupt:
        print("partplan: interrupted", file=real_stderr)
        return 130
    except SystemError as exc:
        if not _from_interrupt(exc):
            raise
        print("partplan: interrupted", file=real_stderr)
        return 130
    except _Terminated as exc:
        import signal
        print(f"partplan: interrupted ({signal.Signals(exc.signum).name})", file=real_stderr)
        return 128 + int(exc.signum)
    except (MemoryError, RuntimeError) as exc:
        if not _out_of_memory(exc):
            raise
        # the readers refuse what their headers say exceeds the budget; this is memory the work itself
        # could not get (the machine's, a ulimit, a device's): one line, not a traceback
        print(f"partplan: error: out of memory: {_first_line(exc)} (the readers' budget is $PARTPLAN_MAX_BYTES; "
              f"more processes or a larger machine share the work)", file=real_stderr)
        return 1
    except BrokenPipeError:  # output piped into `head` etc.: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        from partplan import _atomic
        if exc.filename is None and exc.errno in _atomic._NO_SPACE:   # no room, where the write names no file
            print(f"partplan: error: a write failed: {exc.strerror} (a full disk, a quota or a file-size limit)",
                  file=real_stderr)
            return 2
        if not _users_path_error(exc):
            raise
        # a path the system refused (a name too long, no permission, a full disk): the path and
        # the system's reason, whichever reader or writer met it
        both = f"{exc.filename} -> {exc.filename2}" if exc.filename2 is not None else f"{exc.filename}"
        print(f"partplan: error: {both}: {exc.strerror}", file=real_stderr)
        return 2
    finally:
        import signal
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
        sys.stderr = real_stderr
        if getattr(args, "quiet", False):  # main() may run again in this process (tests, notebooks)
            if quiet_env is None:
                os.environ.pop("PARTPLAN_QUIET", None)
            else:
                os.environ["PARTPLAN_QUIET"] = quiet_env


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
