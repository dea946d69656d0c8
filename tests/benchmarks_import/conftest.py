"""The fixtures are benchmarks' own files (Terminal-Bench's tests/test_outputs.py run inside a task's sandbox), not
tests of this suite."""

collect_ignore_glob = ["fixtures/*"]
