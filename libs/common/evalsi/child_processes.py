"""Child processes that never outlive the process that started them.

``evalsi serve`` may be killed with SIGKILL, which it cannot catch: its services and nats-server would keep
running under PID 1, holding the ports and the state directory. On Linux the kernel sends a child a signal of
our choice when its parent dies (``PR_SET_PDEATHSIG``), which survives ``exec``.

It is set by a small launcher that execs the real command, not by a ``preexec_fn``: a ``preexec_fn`` makes
Python fork with its at-fork handlers, and gRPC's (loaded in the supervisor, or in a test process holding a
channel) broke the child between fork and exec now and then (an epoll "Bad file descriptor", then no child).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

# argv: signal, the parent's pid, then the command. Exits 1 if the parent is already gone (no signal would come).
_LAUNCHER = (
    "import ctypes, os, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(sys.argv[1]), 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[2]):\n"
    "    os._exit(1)\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)


def with_death_signal(argv: Sequence[str], signum: int = signal.SIGKILL) -> list[str]:
    """``argv`` run so that it gets ``signum`` when this process dies (unchanged off Linux).

    The death signal is tied to the *thread* that starts the child: start children from a thread that lives as
    long as they should (the main thread, or a supervising thread that outlives them). The child keeps its pid
    and, after the exec, its own command line.
    """
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(int(signum)), str(os.getpid()), *argv]
