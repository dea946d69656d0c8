"""Each service's NATS user (evalsi.bus.permissions): its grants cover what the bus document says it does, and a
worker's stop at its own pool; credentials files (evalsi.bus.credentials); connecting with them to a real server."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from evalsi.bus import connect, ensure_streams, publish, subjects
from evalsi.bus.asyncapi import _PUBLISHED
from evalsi.bus.credentials import inbox_prefix, read_credentials, write_credentials
from evalsi.bus.natsserver import NatsServer
from evalsi.bus.permissions import ADMIN, all_identities, authorization, bus_permissions
from evalsi.bus.v1alpha1.bus_pb2 import RunControl
from evalsi.errors import BadInputError, InfraError
from evalsi.service.config import Config
from evalsi.service.settings import NATS_CREDENTIALS
from evalsi.service.supervisor import plan_children

POOLS = ("cpu", "judge", "harness")


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` is one token, a final ``>`` one or more."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(want) == len(have)


def may_publish(identity: str, subject: str) -> bool:
    return any(matches(grant.subject, subject) for grant in bus_permissions(identity).publish)


def may_subscribe(identity: str, subject: str) -> bool:
    return any(matches(grant.subject, subject) for grant in bus_permissions(identity).subscribe)


def test_every_channel_the_bus_document_publishes_has_a_publisher_allowed_to() -> None:
    services = [identity for identity in all_identities(POOLS) if identity != ADMIN]
    for address, _stream, _title, description in _PUBLISHED:
        subject = address.replace("{pool}", "cpu").replace("{run_id}", "r1").replace("{project}", "default") \
            .replace("{partition}", "0").replace("{name}", "cpu")
        allowed = [identity for identity in services if may_publish(identity, subject)]
        assert allowed, f"nobody may publish {subject} ({description})"


def test_a_worker_consumes_its_pool_only_and_publishes_results_only() -> None:
    worker = "worker-cpu"
    assert may_publish(worker, subjects.results("r1"))
    assert may_publish(worker, "$JS.API.CONSUMER.MSG.NEXT.WORK.work-cpu")
    assert may_publish(worker, "$JS.ACK.WORK.work-cpu.1.2.3.4.5")
    assert may_subscribe(worker, subjects.evaluate("cpu"))
    assert bus_permissions(worker).allow_responses  # the Evaluate reply, once, to the requester's inbox
    # Its durable can be (re)created only on its own pool's subject: the filter is in the granted subject.
    assert may_publish(worker, "$JS.API.CONSUMER.CREATE.WORK.work-cpu.work.cpu")
    assert not may_publish(worker, "$JS.API.CONSUMER.CREATE.WORK.work-cpu.work.judge")
    for refused in (subjects.run_control("r1"), subjects.work("cpu"), subjects.work("judge"),
                    subjects.run_events("r1"), subjects.traces_completed("default"), subjects.deadletter("judge"),
                    "$JS.API.CONSUMER.MSG.NEXT.WORK.work-judge", "$JS.ACK.WORK.work-judge.1.2.3.4.5",
                    "$KV.evalsi-runs.r1", "$JS.API.STREAM.MSG.DELETE.WORK", "evaluate.cpu"):
        assert not may_publish(worker, refused), refused
    for refused in (subjects.evaluate("judge"), subjects.work("judge"), "_INBOX.api.x", "_INBOX.x"):
        assert not may_subscribe(worker, refused), refused
    assert may_subscribe(worker, f"{inbox_prefix(worker)}.abc.1")


def test_only_the_api_publishes_run_control_and_only_the_scheduler_work() -> None:
    identities = [identity for identity in all_identities(POOLS) if identity != ADMIN]
    assert [i for i in identities if may_publish(i, subjects.run_control("r1"))] == ["api"]
    assert [i for i in identities if may_publish(i, subjects.work("judge"))] == ["scheduler"]
    assert [i for i in identities if may_publish(i, "$KV.evalsi-runs.r1")] == ["scheduler"]
    assert sorted(i for i in identities if may_publish(i, subjects.evaluate("cpu"))) == ["api", "policy"]


def test_every_grant_says_why_and_the_server_block_admits_each_user_with_its_own() -> None:
    for identity in all_identities(POOLS):
        if identity == ADMIN:
            continue
        grants = bus_permissions(identity)
        assert all(grant.why for grant in (*grants.publish, *grants.subscribe))
    block = authorization({"api": "a-pass", "worker-cpu": "w-pass", ADMIN: "o-pass"})
    users = {user["user"]: user for user in block["users"]}
    assert users["api"]["password"] == "a-pass"
    assert "runs.control.*" in users["api"]["permissions"]["publish"]["allow"]
    assert users["worker-cpu"]["permissions"]["allow_responses"] is True
    assert "permissions" not in users[ADMIN]
    with pytest.raises(ValueError, match="no bus identity 'intruder'"):
        bus_permissions("intruder")


def test_credentials_files_are_written_private_and_read_back(tmp_path: Path) -> None:
    path = write_credentials(tmp_path / "creds" / "api", "api", "s3cret-value")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    read = read_credentials(path)
    assert (read.user, read.password) == ("api", "s3cret-value")
    assert "s3cret-value" not in repr(read)
    jwt = tmp_path / "user.creds"
    jwt.write_text("-----BEGIN NATS USER JWT-----\neyJ...\n------END NATS USER JWT------\n")
    assert read_credentials(jwt).connect_options() == {"user_credentials": str(jwt.resolve())}
    bad = tmp_path / "bad"
    bad.write_text("no colon here\n")
    with pytest.raises(BadInputError, match=r"--nats-credentials: .*bad holds neither"):
        read_credentials(bad)
    with pytest.raises(BadInputError, match=r"nats.credentials_file: cannot read"):
        read_credentials(tmp_path / "missing", "nats.credentials_file")


def test_a_service_connects_with_its_file_and_a_wrong_password_is_refused_without_showing_it(
    tmp_path: Path,
) -> None:
    good = read_credentials(write_credentials(tmp_path / "api", "api", "right-password"))
    wrong = read_credentials(write_credentials(tmp_path / "other", "api", "wrong-password"))

    async def scenario(url: str) -> str:
        bus = await connect(url, name="api-test", credentials=good, give_up_after_s=5)
        try:
            assert bus.inbox_prefix == "_INBOX.api"
            await ensure_streams(bus.js)
            await publish(bus.js, subjects.run_control("r1"), RunControl(run_id="r1"), key="k1")
        finally:
            await bus.close()
        with pytest.raises(InfraError) as refused:
            # Several attempts: one may lose the server's -ERR line to its connection reset.
            await connect(url, name="api-test", credentials=wrong, give_up_after_s=6)
        return str(refused.value)

    with NatsServer(authorization=authorization({"api": "right-password"})) as server:
        reason = asyncio.run(scenario(server.url))
    assert "authorization" in reason.lower()
    assert "wrong-password" not in reason and "right-password" not in reason


def test_services_of_an_external_nats_get_its_credentials_file_by_path(tmp_path: Path) -> None:
    secret = write_credentials(tmp_path / "nats-user", "evalsi", "external-secret")
    config = Config.from_mapping({"nats": {"url": "nats://nats.internal:4222", "credentials_file": str(secret)}})
    assert config.nats_credentials_file == str(secret)
    children = plan_children(config, config.nats_url, tmp_path / "state")
    variable = NATS_CREDENTIALS.variable("")
    # Every service on the bus gets the file by path; sandboxd, which is not on the bus, holds no bus secret at all.
    assert {child.name for child in children if child.env.get(variable) == str(secret.resolve())} == {
        child.name for child in children if child.name != "sandboxd"}
    assert [variable not in child.env for child in children if child.name == "sandboxd"] == [True]
    assert not any("external-secret" in " ".join(child.argv) for child in children)
    with pytest.raises(BadInputError, match=r"nats.credentials_file: must be a string"):
        Config.from_mapping({"nats": {"url": "nats://x:4222", "credentials_file": 3}})
    with pytest.raises(BadInputError, match=r"nats: password: unknown key"):
        Config.from_mapping({"nats": {"url": "nats://x:4222", "password": "inline"}})
