"""The fixtures are benchmarks' own files (Terminal-Bench's tests/test_outputs.py run inside a task's sandbox), not
tests of this suite. Tasks here run in sandboxes that, run as root, start as an unprivileged host user: ``tmp_path``
lies where that user can reach it (tests/reachable_tmp_path.py), so they run on bubblewrap, not a slower rung."""

from reachable_tmp_path import tmp_path

collect_ignore_glob = ["fixtures/*"]

__all__ = ["tmp_path"]  # found by pytest as this directory's fixture
