"""Sandboxed tests hand paths to a sandbox that, run as root, starts as an unprivileged host user: ``tmp_path`` here
lies where that user can reach it (tests/reachable_tmp_path.py)."""

from reachable_tmp_path import tmp_path

__all__ = ["tmp_path"]  # found by pytest as this directory's fixture
