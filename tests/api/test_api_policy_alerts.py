"""MonitorService.ListPolicyAlerts over HTTP/JSON and gRPC from the real metadata store evalsi-policy records alerts
in: newest window first, paged with a bounded page size, within the call's project; without an alert store, a
missing policy or a bad token, the answers say so."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from api_doubles import Api

from evalsi.api import ApiServer, MonitorHandlers, ServerConfig, build_table
from evalsi.api.context import CallContext
from evalsi.api.errors import ApiError
from evalsi.client import Client
from evalsi.client_transports import NotFoundError
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.policy import parse_policy
from evalsi.stores import FiredAlert, SqlMetadataStore
from evalsi.v1alpha1.monitor_service_pb2 import (
    ALERT_DELIVERY_DELIVERED,
    ALERT_DELIVERY_FAILED,
    ALERT_DELIVERY_NOT_SENT,
    ListPolicyAlertsRequest,
)

POLICY = {
    "apiVersion": "evals.si/v1alpha1", "kind": "OnlineEvalPolicy", "metadata": {"name": "prod"},
    "spec": {"sampling": {"rate": 1.0}, "cascade": [{"ref": "builtin/exact-match"}]},
}


def alert(i: int, delivery: str, **kw: Any) -> FiredAlert:
    return FiredAlert(policy="prod", key=f"k{i}", rule=0, when="mean('exact-match') < 0.5", window_start=300.0 * i,
                      window_end=300.0 * (i + 1), values={"mean('exact-match')": 0.25}, fired_at=300.0 * i + 7,
                      delivery=delivery, attempts=kw.pop("attempts", 1), **kw)


async def test_alerts_over_both_transports(api: Api, registry: Registry, tmp_path: Path) -> None:
    metadata = await SqlMetadataStore.open_sqlite(tmp_path / "evalsi.db")
    await metadata.record_policy_alert("support", alert(1, "delivered", http_status=204))
    await metadata.record_policy_alert("support", alert(2, "failed", http_status=500, error="HTTP 500", attempts=5))
    await metadata.record_policy_alert("support", alert(3, "not_sent", attempts=0, error="secret unset"))
    await metadata.record_policy_alert("other", alert(9, "delivered", http_status=200))
    monitor = MonitorHandlers(metadata, None, registry=registry, alerts=metadata)
    table = build_table(evaluation=api.evaluation, runs=api.runs, catalog=api.catalog, monitor=monitor)
    server = ApiServer(table, ServerConfig(http_port=0, grpc_port=0, grace_period_s=1.0), readiness=api.readiness,
                       metrics=api.metrics)
    await server.start()

    def calls() -> tuple[list[Any], list[Any], bytes]:
        http, grpc = f"http://127.0.0.1:{server.http_port}", f"grpc://127.0.0.1:{server.grpc_port}"
        with Client(http, project="support") as client:
            client.policies.apply(POLICY)
            over_http = list(client.policies.alerts("prod", page_size=2))  # two pages
        with Client(grpc, project="support") as client:
            over_grpc = list(client.policies.alerts("prod"))
            with pytest.raises(NotFoundError, match="policy 'nope' not found"):
                list(client.policies.alerts("nope"))
        request = urllib.request.Request(f"{http}/v1alpha1/policies/prod/alerts?pageSize=1",
                                         headers={"x-evalsi-project": "support"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return over_http, over_grpc, answer.read()

    try:
        over_http, over_grpc, raw = await asyncio.to_thread(calls)
    finally:
        await server.stop()
        await metadata.close()
    assert over_http == over_grpc
    assert [a.key for a in over_http] == ["k3", "k2", "k1"]  # newest window first; project "other"'s left out
    not_sent, failed, delivered = over_http
    assert (delivered.delivery, delivered.http_status, delivered.attempts) == (ALERT_DELIVERY_DELIVERED, 204, 1)
    assert (failed.delivery, failed.http_status, failed.error, failed.attempts) == (
        ALERT_DELIVERY_FAILED, 500, "HTTP 500", 5)
    assert (not_sent.delivery, not_sent.http_status, not_sent.error) == (ALERT_DELIVERY_NOT_SENT, 0, "secret unset")
    assert delivered.window_start_time.ToSeconds() == 300 and delivered.window_end_time.ToSeconds() == 600
    assert delivered.fire_time.ToSeconds() == 307 and dict(delivered.values) == {"mean('exact-match')": 0.25}
    assert b'"delivery":"ALERT_DELIVERY_NOT_SENT"' in raw.replace(b" ", b"") and b'"nextPageToken"' in raw


async def test_bounds_and_missing_parts(registry: Registry, tmp_path: Path) -> None:
    metadata = await SqlMetadataStore.open_sqlite(tmp_path / "evalsi.db")
    try:
        await metadata.put_policy("default", parse_policy(POLICY, source="<test>"))
        for i in range(3):
            await metadata.record_policy_alert("default", alert(i, "delivered", http_status=200))
        ctx = CallContext(method="ListPolicyAlerts", request_id="r")
        monitor = MonitorHandlers(metadata, None, registry=registry, alerts=metadata)
        # A page size over the server's limit is cut to it, not refused; a negative one is refused.
        big = await monitor.list_policy_alerts(ListPolicyAlertsRequest(name="prod", page_size=10**6), ctx)
        assert len(big.alerts) == 3 and big.next_page_token == ""
        with pytest.raises(BadInputError, match="page_size: -1"):
            await monitor.list_policy_alerts(ListPolicyAlertsRequest(name="prod", page_size=-1), ctx)
        with pytest.raises(BadInputError, match="not a token this store returned"):
            await monitor.list_policy_alerts(ListPolicyAlertsRequest(name="prod", page_token="nonsense!"), ctx)
        without = MonitorHandlers(metadata, None, registry=registry)
        with pytest.raises(ApiError, match="no alert store is configured") as caught:
            await without.list_policy_alerts(ListPolicyAlertsRequest(name="prod"), ctx)
        assert caught.value.code.name == "FAILED_PRECONDITION"
    finally:
        await metadata.close()
