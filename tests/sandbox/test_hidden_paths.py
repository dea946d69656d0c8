"""A missing-file error naming a path the host has is the sandbox hiding it (a denial); one the host lacks is not."""

from __future__ import annotations

from pathlib import Path

from evalsi.sandbox.hidden_paths import hidden_host_path
from evalsi.sandbox.model import Outcome
from evalsi.sandbox.process import COMMON_DENIALS, Dialect, Finished, classify


def test_a_path_the_host_has_is_named_and_one_it_lacks_is_not(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    assert hidden_host_path(f"cat: {secret}: No such file or directory\n".encode()) == str(secret)
    assert hidden_host_path(f"FileNotFoundError: [Errno 2] No such file or directory: '{secret}'") == str(secret)
    assert hidden_host_path(f"cat: {tmp_path}/absent: No such file or directory") == ""
    assert hidden_host_path(f"{secret}: some other error") == ""  # not a missing-file line
    assert hidden_host_path("cat: relative.txt: No such file or directory") == ""


def test_classify_makes_it_a_denial_and_leaves_ordinary_failures_exits(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    dialect = Dialect(lambda finished: "", COMMON_DENIALS)

    def finished(stderr: str) -> Finished:
        return Finished(returncode=1, stdout=b"", stderr=stderr.encode())

    assert classify(finished(f"cat: {secret}: No such file or directory\n"), dialect) == Outcome(
        "denied", code=1, effect=f"host path not visible in the sandbox: {secret}")
    assert classify(finished("AssertionError: wrong answer\n"), dialect) == Outcome("exit", code=1)
