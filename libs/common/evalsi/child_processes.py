"""Child processes that never outlive the process that started them.

``evalsi serve`` may be killed with SIGKILL, which it cannot catch: its services and nats-server would keep
running under PID 1, holding the ports and the state directory. On Linux the kernel sends a child a signal of
our choice when its parent dies (``PR_SET_PDEATHSIG``), set in the child between fork and exec.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child gets ``signum`` when this process dies; None where
    the platform has no such mechanism.

    The death signal is tied to the *thread* that forks: start children from a thread that lives as long as
    they should (the main thread, or a supervising thread that outlives them).
    """
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: the child must not load libraries after fork
    parent = os.getpid()

    def set_death_signal() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        # The parent may have died between fork and prctl; then no signal will ever come.
        if os.getppid() != parent:
            os._exit(1)

    return set_death_signal
