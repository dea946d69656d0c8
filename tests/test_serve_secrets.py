"""Passwords in store and bus URLs never reach a console, a log line or an error message: one masking helper,
applied to every service log line, and a warning when a password is given on a service's command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.masking import flags_with_secrets, mask_url, mask_urls_in
from evalsi.stores import open_object_store

SECRET = "pw-39c1-never-logged"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (f"postgresql://evalsi:{SECRET}@127.0.0.1:5432/evalsi", "postgresql://evalsi:***@127.0.0.1:5432/evalsi"),
        ("postgresql://evalsi@127.0.0.1/evalsi", "postgresql://evalsi@127.0.0.1/evalsi"),  # nothing secret
        (f"postgres://u:{SECRET}/x@h,h2:5433/db?sslmode=require", "postgres://u:***@h,h2:5433/db?sslmode=require"),
        (f"postgresql://h/db?user=u&password={SECRET}&sslmode=disable",
         "postgresql://h/db?user=u&password=***&sslmode=disable"),
        (f"nats://{SECRET}@127.0.0.1:4222", "nats://***@127.0.0.1:4222"),  # a NATS token is the user part
        (f"nats://app:{SECRET}@127.0.0.1:4222", "nats://app:***@127.0.0.1:4222"),
        (f"clickhouse://default:{SECRET}@127.0.0.1:9000/evalsi", "clickhouse://default:***@127.0.0.1:9000/evalsi"),
        (f"s3://bucket/p?endpoint=http://127.0.0.1:8333&secret_key={SECRET}",
         "s3://bucket/p?endpoint=http://127.0.0.1:8333&secret_key=***"),
        ("sqlite:////var/lib/evalsi.db", "sqlite:////var/lib/evalsi.db"),
        ("/var/lib/evalsi/objects", "/var/lib/evalsi/objects"),
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked
    assert SECRET not in mask_urls_in(f"connecting to {url} failed: refused")


def test_password_flags_are_found_in_both_flag_forms() -> None:
    argv = ["--metadata-url", f"postgresql://u:{SECRET}@h/db", f"--nats=nats://{SECRET}@h:4222", "--objects-url",
            "s3://b?endpoint=http://h:1", "--pool", "cpu"]
    assert flags_with_secrets(argv) == ["--metadata-url", "--nats"]


async def test_store_url_errors_mask_the_password() -> None:
    with pytest.raises(BadInputError) as raised:
        await open_object_store(f"s3://u:{SECRET}@bucket/prefix?region=x")
    message = str(raised.value)
    assert SECRET not in message and "'s3://u:***@bucket/prefix?region=x'" in message
    assert "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in message


def test_a_service_warns_of_a_password_on_its_command_line_and_never_logs_it(tmp_path: Path) -> None:
    # Nothing listens on port 1: the api fails to open its store and logs why, with a traceback.
    done = subprocess.run(
        [sys.executable, "-m", "evalsi_api.main", "--http-port", "0", "--grpc-port", "0", "--datasets-dir",
         str(tmp_path), "--nats", "nats://127.0.0.1:1", "--metadata-url",
         f"postgresql://evalsi:{SECRET}@127.0.0.1:1/evalsi"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert SECRET not in done.stderr + done.stdout
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    warning = lines[0]
    assert warning["level"] == "warning" and warning["event"].startswith(
        "--metadata-url: a password or token on the command line"
    )
    failure = next(line for line in lines if line["event"] == "evalsi-api failed")
    (exception,) = [e for e in failure["exception"] if e["exc_type"] == "InfraError"]
    assert exception["exc_value"].startswith("Postgres at postgresql://evalsi:***@127.0.0.1:1/evalsi: ")
    # Frames, but not their local variables (asyncpg keeps the password in one).
    assert exception["frames"] and all("locals" not in frame for frame in exception["frames"])


async def test_a_bus_that_cannot_be_reached_is_reported_without_its_token() -> None:
    from evalsi.bus import connect
    from evalsi.errors import InfraError

    with pytest.raises(InfraError) as raised:  # nothing listens on port 1
        await connect(f"nats://{SECRET}@127.0.0.1:1", name="test", give_up_after_s=0.2)
    assert SECRET not in str(raised.value) and "connecting to nats://***@127.0.0.1:1" in str(raised.value)
