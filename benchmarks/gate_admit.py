"""What the one enforcement point costs a call: the api's ListEvaluators over gRPC with no gate (authentication
off) and with the gate (an RS256 bearer token, an ``evk_`` API key), the api in this process on loopback; and
``Gate.admit`` alone (authenticate, the action table, the attributes, the authorizer's decision), no transport.

Prints microseconds of process CPU and of wall time per call (client and server share the process, so the gRPC
figures are both sides together; the difference between the rows is the gate's), and the load average.

    .venv/bin/python benchmarks/gate_admit.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from evalsi.api import ApiServer, CatalogHandlers, EvaluationHandlers, RunHandlers, ServerConfig, build_table
from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.auth.principal import Credentials
from evalsi.evaluators import Registry
from evalsi.gate.access import Gate
from evalsi.gate.exposure import AccessSettings
from evalsi.v1alpha1.catalog_service_pb2 import ListEvaluatorsRequest
from evalsi.v1alpha1.run_service_pb2 import GetRunRequest

ISSUER = "https://sso.example.test/realms/bench"
AUDIENCE = "evals.si"
LIST_EVALUATORS = "/evalsi.v1alpha1.CatalogService/ListEvaluators"


def _settings() -> tuple[AccessSettings, str, str]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**RSAAlgorithm.to_jwk(private.public_key(), as_dict=True), "kid": "k1"}
    key = new_api_key()
    settings = AccessSettings.from_document({
        "auth": {
            "jwt": {"providers": [{"name": "corp", "issuer": ISSUER, "audiences": [AUDIENCE],
                                   "jwks": {"inline": {"keys": [jwk]}}}]},
            "api_keys": {"keys": [{"name": "ci", "key": hash_api_key(key), "roles": {"a": ["viewer"]}}]},
        },
        "rbac": {"projects": {"a": {"viewer": ["user:corp/bench"]}}},
    })
    now = int(time.time())
    token = jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "bench", "iat": now, "exp": now + 3600}, private,
                       algorithm="RS256", headers={"kid": "k1"})
    return settings, token, key


async def _measure(calls: int, call: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    for _ in range(min(200, calls)):
        await call()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.process_time() - cpu) / calls * 1e6, (time.perf_counter() - wall) / calls * 1e6


async def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("not called")


async def _served(registry: Registry, gate: Gate | None, calls: int, metadata: tuple[tuple[str, str], ...]) -> (
        tuple[float, float]):
    runs = RunHandlers(store=None, objects=None, control=_refuse, watch=_refuse,  # type: ignore[arg-type]
                       validate_run=lambda run: None, load_records=_refuse)  # type: ignore[arg-type]
    table = build_table(evaluation=EvaluationHandlers(_refuse, registry=registry), runs=runs,
                        catalog=CatalogHandlers(registry))
    server = ApiServer(table, ServerConfig(host="127.0.0.1", http_port=0, grpc_port=0, grace_period_s=0), gate=gate)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            method = channel.unary_unary(LIST_EVALUATORS)
            request = ListEvaluatorsRequest().SerializeToString()
            return await _measure(calls, lambda: method(request, metadata=metadata, timeout=10))
    finally:
        await server.stop()


async def main(calls: int) -> None:
    registry = Registry.from_entry_points()
    settings, token, key = _settings()
    rows: list[tuple[str, float, float]] = []
    request = GetRunRequest(id="run-1")
    for name, credential in (("bearer RS256", token), ("evk_ API key", key)):
        gate = settings.gate()
        assert gate is not None
        credentials = Credentials(transport="grpc", headers={"authorization": f"Bearer {credential}"},
                                  peer="127.0.0.1")
        rows.append((f"Gate.admit, GetRun, {name}", *await _measure(
            calls, lambda g=gate, c=credentials: g.admit("evalsi.v1alpha1.RunService/GetRun", c, request,
                                                          project="a"))))
    # Alternated, twice: on a shared machine the load drifts more between runs than the gate costs.
    for round_ in (1, 2):
        rows.append((f"gRPC ListEvaluators, no gate ({round_})", *await _served(registry, None, calls, ())))
        for name, credential in (("bearer RS256", token), ("evk_ API key", key)):
            metadata = (("authorization", f"Bearer {credential}"), ("x-evalsi-project", "a"))
            rows.append((f"gRPC ListEvaluators, gate, {name} ({round_})",
                         *await _served(registry, settings.gate(), calls, metadata)))
    print(f"load average {os.getloadavg()[0]:.1f}; {calls} calls each")
    for name, cpu, wall in rows:
        print(f"{name:<46} {cpu:8.1f} µs CPU {wall:9.1f} µs wall per call")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=2000)
    asyncio.run(main(parser.parse_args().calls))
