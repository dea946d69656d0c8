"""Services started as forks of ``evalsi serve``, whose imports are loaded once, before the first fork.

Each service is a fresh ``python -m evalsi_<service>.main`` in principle, but every one of them imports the same
~1,400 modules (grpc, aiohttp, faststream and pydantic, protobuf and the generated messages, the evalsi library):
about 2 CPU seconds apiece, so seven services spent some 15 CPU seconds importing the same code before the first
could answer (the 45 s to ready of issue 12, on two loaded cores). The supervisor imports what a service's
package imports at module level (read from its sources, so the list follows the code) and forks; the child calls
the service's ``main`` exactly as its console script would. Only the service's own package is imported in the
child, so its module-level metrics and state exist in that service alone.

What a fork inherits, and an exec would not have given it, is reset here: the process group, the death signal,
signal handlers, standard streams (the service's log), the environment (store URLs travel in it, never on a
command line) and ``sys.argv``. The supervisor forks from a single-threaded process that holds no gRPC channel,
event loop or socket, so no library's state is caught mid-operation (gRPC initialises itself on first use, in
the child; numpy's BLAS pool re-creates itself after a fork).
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import gc
import importlib
import importlib.util
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

_PR_SET_NAME = 15
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


def service_imports(module: str) -> tuple[str, ...]:
    """The modules the package of ``module`` (``evalsi_api`` for ``evalsi_api.main``) imports at module level,
    its own modules left out: ``import x`` gives ``x``, ``from x import y`` gives ``x`` and ``x.y`` (which may be a
    submodule). Imports inside functions stay out: they are deferred on purpose."""
    package = module.split(".")[0]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return ()
    names: set[str] = set()
    for location in spec.submodule_search_locations:
        for path in sorted(Path(location).rglob("*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
                if isinstance(node, ast.Import):
                    names.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module)
                    names.update(f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*")
    return tuple(sorted(n for n in names if n.split(".")[0] not in (package, "__future__")))


def preload(modules: Iterable[str]) -> int:
    """Import ``modules`` into this process (the number newly imported), then freeze what was imported out of the
    garbage collector's sight, so neither this process nor its forks walk those objects again.

    The collector is off meanwhile: its ~350 passes over the growing heap were ~11% of the imports' CPU, and
    the one collection at the end finds what little garbage the imports left."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        loaded = _import_all(modules)
    finally:
        gc.collect()
        gc.freeze()
        if collecting:
            gc.enable()
    return loaded


def _import_all(modules: Iterable[str]) -> int:
    loaded = 0
    for name in modules:
        if name in sys.modules:
            continue
        parent, _, attribute = name.rpartition(".")
        if parent in sys.modules and hasattr(sys.modules[parent], attribute):
            continue  # ``from x import y`` where y is a name, not a submodule
        try:
            importlib.import_module(name)
        except Exception:
            # Not a module (a name of a package not imported yet), or a broken install: the service imports it
            # again itself and reports the failure in its own log, as it would have without preloading.
            continue
        loaded += 1
    return loaded


class ForkedProcess:
    """A forked child, with the part of ``subprocess.Popen``'s interface the supervisor uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its status is lost
                self.returncode = -1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.returncode = -1
            else:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def fork_service(name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> ForkedProcess:
    """Run ``argv`` (``[python, "-m", "<package>.main", *flags]``) as a fork of this process: the module's
    ``main(flags)`` with ``env`` as its environment, stdout and stderr appended to ``log_path``, in its own
    process group, killed by the kernel when this thread ends (``PR_SET_PDEATHSIG``). Its command line stays the
    supervisor's; ``name`` becomes its process name (what ``top`` and ``ps -o comm`` show, 15 bytes at most)."""
    if len(argv) < 3 or argv[1] != "-m":
        raise ValueError(f"a forked service is `python -m module [flags]`, got {list(argv)}")
    if threading.active_count() > 1:
        # Another thread may hold a lock (logging's, an import lock) that the child would wait on forever.
        raise RuntimeError("services are forked from a single-threaded supervisor only; this process has "
                           f"{threading.active_count()} threads")
    module, flags = argv[2], list(argv[3:])
    parent = os.getpid()
    for stream in (sys.stdout, sys.stderr):  # or the child would write the parent's buffered console lines again
        with contextlib.suppress(Exception):
            stream.flush()
    # Held until the child has its own handlers: one arriving in between would reach the supervisor's (which only
    # flags a stop) in the child, and be lost.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        pid = os.fork()
        if pid == 0:
            _run_in_child(name, module, flags, env, log_path, parent, mask)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return ForkedProcess(pid)


def _run_in_child(name: str, module: str, flags: list[str], env: Mapping[str, str], log_path: Path,
                  parent: int, mask: set[int | signal.Signals]) -> NoReturn:
    code: int = 1
    try:
        os.setpgid(0, 0)  # its own group: Ctrl-C reaches the supervisor only, and stop() ends what it started
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the supervisor died before the death signal was armed
                os._exit(1)
            libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
        # The handlers a fresh interpreter has, not the supervisor's (which only flag a stop of the supervisor).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a stop sent meanwhile arrives now, to these
        log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        # As PYTHONUNBUFFERED gives a fresh interpreter: each line reaches the log as it is written.
        for stream in (sys.stdout, sys.stderr):
            if hasattr(stream, "reconfigure"):
                stream.reconfigure(line_buffering=True, write_through=True)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [module, *flags]
        code = _exit_code(importlib.import_module(module).main(flags))
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # whatever it was, it is logged and the child ends here
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        # Never back into the supervisor's code (its loop, its stop of every child): the child ends here.
        os._exit(code)


def _exit_code(value: object) -> int:
    """What the interpreter would exit with for ``sys.exit(value)``."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1
