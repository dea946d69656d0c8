"""Who may submit a CLI agent run on a gated api: the caller needs runs.create as for any run, a CLI agent counts as
running code for the operator's rules (resource.runs_code), and no role widens the operator's cli_agents: policy
(an admin's disallowed command is refused like anyone's). A real api over gRPC, in this process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from evalsi.api import ApiServer, CatalogHandlers, EvaluationHandlers, RunHandlers, ServerConfig, build_table
from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.auth.authenticator import Authenticator
from evalsi.auth.config import load_auth_config
from evalsi.authz import BUILTIN_ROLES
from evalsi.authz.authorizer import Authorizer
from evalsi.connections import Connections
from evalsi.evaluators import Registry
from evalsi.gate.access import Gate
from evalsi.gate.stored_access import LiveAuthorizer
from evalsi.stores import open_metadata_store
from evalsi.v1alpha1.run_pb2 import EvalRun
from evalsi.v1alpha1.run_service_pb2 import CreateRunRequest
from evalsi.v1alpha1.run_service_pb2_grpc import RunServiceStub

KEYS = {"reader": ["viewer"], "runner": ["runner"], "lead": ["admin"]}
# The operator's rule: only admins run code (evaluators on code pools, python or CLI agents).
RULES = [{"require": '!resource.runs_code || "admin" in principal.roles'}]
POLICY = {"commands": ["sh"]}


@pytest.fixture
async def call(tmp_path: Path) -> AsyncIterator[Any]:
    store = await open_metadata_store(f"sqlite:///{tmp_path / 'evalsi.db'}")
    secrets = {name: new_api_key() for name in KEYS}
    auth = load_auth_config({"api_keys": {"mode": "strict", "keys": [
        {"name": name, "key": hash_api_key(secrets[name]), "roles": {"p": roles}} for name, roles in KEYS.items()]}})
    authorizer = LiveAuthorizer(Authorizer.from_config({}, {"rules": RULES}), store, refresh_s=3600)
    await authorizer.start()

    def unused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a refused run reaches nothing beyond its checks")

    registry = Registry.from_entry_points()
    runs = RunHandlers(store=store, objects=None, control=unused, watch=unused,  # type: ignore[arg-type]
                       validate_run=lambda run: None, load_records=unused,
                       connections=Connections.from_mapping(None, None, cli_agents=POLICY))
    table = build_table(evaluation=EvaluationHandlers(unused, registry=registry), runs=runs,
                        catalog=CatalogHandlers(registry))
    server = ApiServer(table, ServerConfig(host="127.0.0.1", http_port=0, grpc_port=0),
                       gate=Gate(Authenticator(auth), authorizer))
    await server.start()

    async def create(key: str, command: list[str]) -> grpc.aio.AioRpcError:
        run = json_format.ParseDict({"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun",
                                     "metadata": {"name": "cli"},
                                     "spec": {"dataset": {"path": "d.jsonl"}, "evaluators": [{"ref": "task-success"}],
                                              "target": {"agent": {"cli": {"command": command}}}}}, EvalRun())
        metadata = [("x-evalsi-project", "p"), ("authorization", f"Bearer {secrets[key]}")]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await RunServiceStub(channel).CreateRun(CreateRunRequest(run=run, project="p"), metadata=metadata,
                                                        timeout=10)
        return caught.value

    try:
        yield create
    finally:
        await server.stop()
        await authorizer.close()
        await store.close()


async def test_runs_create_and_the_operators_rules_decide_who_and_the_policy_what(call: Any) -> None:
    denied = await call("reader", ["sh"])  # a viewer cannot create runs at all
    assert denied.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "runs.create" in (denied.details() or "")
    # A runner holds runs.create, but a CLI agent runs code and the operator's rule keeps runners off code.
    assert "runs.create" in next(role for role in BUILTIN_ROLES if role.name == "runner").permissions
    coded = await call("runner", ["sh"])
    assert coded.code() == grpc.StatusCode.PERMISSION_DENIED
    refused = await call("lead", ["bash", "-c", "id"])  # past the gate, still inside the operator's policy
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert ("spec.target.agent.cli.command[0]: 'bash' is not a command the server's evalsi.yaml cli_agents.commands "
            "allows; accepted: sh") in (refused.details() or "")
