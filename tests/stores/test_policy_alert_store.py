"""Alerts fired by online policies in the metadata store, against SQLite and a real Postgres: one row per alert key
(a second record changes nothing), newest window first in pages, and every read in its own project."""

from __future__ import annotations

import asyncio

import pytest

from evalsi.errors import BadInputError
from evalsi.stores import FiredAlert, SqlMetadataStore


def fired(key: str, start: float, *, delivery: str = "delivered", policy: str = "support", **kw: object) -> FiredAlert:
    fields: dict = {"rule": 0, "when": "mean('polite') < 0.5", "values": {"mean('polite')": 0.25, "n('polite')": 4},
                    "fired_at": start + 3.5, "attempts": 1, "http_status": 200, "notify": "http://127.0.0.1:9/hook"}
    fields.update(kw)
    return FiredAlert(policy=policy, key=key, window_start=start, window_end=start + 60, delivery=delivery, **fields)


async def test_recorded_once_and_read_back(metadata_store: SqlMetadataStore) -> None:
    alert = fired("k1", 600.0)
    assert await metadata_store.record_policy_alert("shop", alert) is True
    # The same alert again (a redelivered trace, another replica) with another outcome: the first record stays.
    again = fired("k1", 600.0, delivery="failed", http_status=500, error="HTTP 500", attempts=5)
    assert await metadata_store.record_policy_alert("shop", again) is False
    read = await metadata_store.get_policy_alert("shop", "support", "k1")
    assert read == alert and read is not None and read.project == "shop"
    assert read.values == {"mean('polite')": 0.25, "n('polite')": 4} and isinstance(read.values["n('polite')"], int)
    page, token = await metadata_store.list_policy_alerts("shop", "support")
    assert page == [alert] and token == ""


async def test_failed_and_not_sent_keep_their_details(metadata_store: SqlMetadataStore) -> None:
    failed = fired("k-failed", 0.0, delivery="failed", http_status=None, error="ClientConnectorError: refused",
                   attempts=5)
    unsent = fired("k-unsent", 60.0, delivery="not_sent", http_status=None, attempts=0,
                   error="the signing secret variable HOOK is unset")
    for alert in (failed, unsent):
        assert await metadata_store.record_policy_alert("", alert)  # "" is the default project
    page, _ = await metadata_store.list_policy_alerts("default", "support")
    assert page == [unsent, failed]
    assert (page[1].http_status, page[1].attempts, page[1].error) == (None, 5, "ClientConnectorError: refused")


async def test_pages_newest_window_first_within_project_and_policy(metadata_store: SqlMetadataStore) -> None:
    alerts = [fired(f"k{i}", 60.0 * (i // 2), rule=i % 2) for i in range(7)]
    await asyncio.gather(*(metadata_store.record_policy_alert("shop", a) for a in alerts))
    await metadata_store.record_policy_alert("shop", fired("other", 9e6, policy="billing"))
    await metadata_store.record_policy_alert("elsewhere", fired("k9", 9e6))
    seen: list[FiredAlert] = []
    token = ""
    while True:
        page, token = await metadata_store.list_policy_alerts("shop", "support", page_size=3, page_token=token)
        assert len(page) <= 3
        seen += page
        if not token:
            break
    assert [a.key for a in seen] == ["k6", "k5", "k4", "k3", "k2", "k1", "k0"]
    assert await metadata_store.get_policy_alert("elsewhere", "support", "k1") is None
    assert [a.key for a in (await metadata_store.list_policy_alerts("elsewhere", "support"))[0]] == ["k9"]

    _, token = await metadata_store.list_policy_alerts("shop", "support", page_size=1)
    with pytest.raises(BadInputError, match="different query"):
        await metadata_store.list_policy_alerts("shop", "billing", page_token=token)
    with pytest.raises(BadInputError, match="page_size 1001 is out of range"):
        await metadata_store.list_policy_alerts("shop", "support", page_size=1001)


def test_an_unknown_delivery_is_refused() -> None:
    with pytest.raises(ValueError, match="expected one of delivered, failed, not_sent"):
        fired("k", 0.0, delivery="sent")
