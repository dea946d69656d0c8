"""`evalsi bus credentials` on its own: what it keeps, replaces, removes and refuses (compose's use of it, with a real
nats-server and services, is tests/test_compose_bus.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from evalsi.bus.credentials import read_credentials
from evalsi.cli.main import cli
from evalsi.errors import BadInputError
from evalsi.service.bus_users_files import CREDENTIALS_FILE, Owner, write_bus_users


def _passwords(out: Path) -> dict[str, str]:
    return {p.parent.name: read_credentials(p).password for p in out.glob(f"*/{CREDENTIALS_FILE}")}


def test_a_garbled_file_gets_a_new_password_and_the_others_are_kept(tmp_path: Path) -> None:
    out = tmp_path / "bus"
    write_bus_users(out, ["cpu"])
    before = _passwords(out)
    (out / "api" / CREDENTIALS_FILE).write_text("")  # a write cut short
    (out / "scheduler" / CREDENTIALS_FILE).write_text("policy:stolen\n")  # another user's line
    written = write_bus_users(out, ["cpu"])
    after = _passwords(out)
    assert sorted(written.made) == ["api", "scheduler"]
    assert {k for k in before if before[k] != after[k]} == {"api", "scheduler"}
    assert read_credentials(out / "scheduler" / CREDENTIALS_FILE).user == "scheduler"


def test_a_retired_pools_user_is_removed_and_nothing_else_is(tmp_path: Path) -> None:
    out = tmp_path / "bus"
    write_bus_users(out, ["cpu", "gpu"])
    (out / "worker-notes").mkdir()  # not ours: more than our one file, or none of it
    (out / "worker-notes" / "README").write_text("keep me")
    written = write_bus_users(out, ["cpu"])
    assert written.removed == ("worker-gpu",)
    assert not (out / "worker-gpu").exists() and (out / "worker-notes" / "README").read_text() == "keep me"
    assert "worker-gpu" not in (out / "nats-server" / "authorization.conf").read_text()


def test_a_file_that_cannot_be_opened_is_refused_never_replaced(tmp_path: Path) -> None:
    out = tmp_path / "bus"
    write_bus_users(out, ["cpu"])
    before = _passwords(out)
    (out / "worker-cpu" / CREDENTIALS_FILE).unlink()
    (out / "worker-cpu" / CREDENTIALS_FILE).mkdir()  # there, but not a file it can read
    with pytest.raises(BadInputError, match=r"worker-cpu/nats\.credentials: cannot read it"):
        write_bus_users(out, ["cpu"])
    assert read_credentials(out / "api" / CREDENTIALS_FILE).password == before["api"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pools", "cpu,nope"], "unknown worker pool 'nope'; pools are cpu, judge, gpu, sandbox, harness"),
        (["--pools", " , "], "--pools"),
        (["--pools", "cpu", "--owner", "no-such-user-here"], "--owner: no user 'no-such-user-here' on this system"),
        (["--pools", "cpu", "--owner", "0:no-such-group-here"], "--owner: no group 'no-such-group-here'"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["bus", "credentials", "--out", str(tmp_path / "bus"), *args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "bus" / "nats-server").exists()


def test_out_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = CliRunner().invoke(cli, ["bus", "credentials", "--pools", "cpu", "--out", str(tmp_path / "file")])
    assert result.exit_code == 2 and "--out" in result.output


def test_owner_takes_names_and_numbers() -> None:
    assert Owner.parse("0") == Owner(0, -1)
    assert Owner.parse("root") == Owner(0, 0)  # a named user's own group
    assert Owner.parse("10001:0") == Owner(10001, 0)
    with pytest.raises(BadInputError, match="USER"):
        Owner.parse(":0")
