"""A host path the sandbox hid from the program: an escape attempt the sandbox refused, so a denial.

A sandbox with its own root shows a program no host file outside it: reading one fails with "No such file or
directory", which by itself reads like the program's own mistake (exit 1). When the path the program named does
exist on the host, the sandbox's root is why it failed, and the outcome is ``denied`` (issue 14: an escape attempt
is never reported as an ordinary exit). Only the first lines of stderr are read, and only absolute paths.
"""

from __future__ import annotations

import os
import re

__all__ = ["hidden_host_path"]

_MISSING = re.compile(r"No such file or directory|\[Errno 2\]|can't open|cannot open|not found")
_PATH = re.compile(r"(?<![\w.])(/[^\s:'\"`,;()\[\]{}<>]+)")
_MAX_TEXT = 4096
_MAX_PATHS = 16


def hidden_host_path(stderr: bytes | str) -> str:
    """The first absolute path a "missing file" line of ``stderr`` names that exists on the host ('' if none)."""
    text = stderr[:_MAX_TEXT].decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr[:_MAX_TEXT]
    checked = 0
    for line in text.splitlines():
        if not _MISSING.search(line):
            continue
        for path in _PATH.findall(line):
            checked += 1
            if checked > _MAX_PATHS:
                return ""
            if path != "/" and os.path.lexists(path):
                return path
    return ""
