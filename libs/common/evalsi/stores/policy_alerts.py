"""Alerts fired by online policies in the metadata store (evalsi-policy writes, MonitorService.ListPolicyAlerts
reads): what each rule read when it held in a window, and what became of its webhook.

A mixin of ``SqlMetadataStore`` (``evalsi.stores.sql``), like ``SqlCaseReports``. A row's key is the alert's key
(``evalsi.policy.windows.alert_key``: the policy, the rule and the window), so the first record of an alert stays
and a second one (a redelivered trace, another replica, a restart) changes nothing. Every read names the project.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .metadata import (
    check_page_size,
    decode_page_token,
    encode_page_token,
    project_or_default,
    query_fingerprint,
)
from .sql_engines import Database

DELIVERED = "delivered"
FAILED = "failed"
NOT_SENT = "not_sent"
DELIVERIES = (DELIVERED, FAILED, NOT_SENT)


@dataclass(frozen=True)
class FiredAlert:
    """One alert as recorded. ``delivery`` is one of ``DELIVERIES``: ``failed`` with the last HTTP status (None when
    no answer came) and the error; ``not_sent`` with why (no webhook sender, the signing secret unset) and no
    attempt. Times are Unix seconds; ``notify`` is the webhook's URL with any password masked."""

    policy: str
    key: str
    rule: int
    when: str
    window_start: float
    window_end: float
    values: Mapping[str, float | int]
    fired_at: float
    delivery: str
    attempts: int
    http_status: int | None = None
    error: str = ""
    notify: str = ""
    project: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.delivery not in DELIVERIES:
            raise ValueError(f"delivery {self.delivery!r}: expected one of {', '.join(DELIVERIES)}")


class PolicyAlertStore(Protocol):
    """Alerts by (project, policy, alert key); newest window first in lists."""

    async def record_policy_alert(self, project: str, alert: FiredAlert) -> bool:
        """Store ``alert`` unless its key is stored for its policy; whether it is new."""
        ...

    async def get_policy_alert(self, project: str, policy: str, key: str) -> FiredAlert | None: ...

    async def list_policy_alerts(
        self, project: str, policy: str, *, page_size: int = 50, page_token: str = ""
    ) -> tuple[list[FiredAlert], str]: ...


class SqlPolicyAlerts:
    """Policy alerts over a ``Database``; the store that mixes this in sets ``_db``."""

    _db: Database

    async def record_policy_alert(self, project: str, alert: FiredAlert) -> bool:
        project = project_or_default(project)
        # Two replicas recording one alert at once: the primary key lets one in, the other changes nothing.
        created = await self._db.fetch(
            f"INSERT INTO policy_alerts (project_id, {_COLUMNS}) VALUES (?, {', '.join('?' for _ in _ORDER)}) "
            "ON CONFLICT (project_id, tenant_id, policy, alert_key) DO NOTHING RETURNING alert_key",
            project, "", alert.policy, alert.key, alert.rule, alert.when, alert.window_start, alert.window_end,
            json.dumps(dict(alert.values), sort_keys=True), alert.fired_at, alert.delivery, alert.http_status,
            alert.error, alert.attempts, alert.notify,
        )
        return bool(created)

    async def get_policy_alert(self, project: str, policy: str, key: str) -> FiredAlert | None:
        project = project_or_default(project)
        rows = await self._db.fetch(
            f"{_SELECT} WHERE project_id = ? AND tenant_id = '' AND policy = ? AND alert_key = ?", project, policy, key
        )
        return _alert(rows[0], project) if rows else None

    async def list_policy_alerts(
        self, project: str, policy: str, *, page_size: int = 50, page_token: str = ""
    ) -> tuple[list[FiredAlert], str]:
        project = project_or_default(project)
        check_page_size(page_size, limit=1_000)
        fingerprint = query_fingerprint("policy_alerts", project, policy)
        cursor = decode_page_token(page_token, fingerprint, types=(float, str))
        where = "project_id = ? AND tenant_id = '' AND policy = ?"
        args: list[Any] = [project, policy]
        if cursor is not None:
            where += " AND (window_start < ? OR (window_start = ? AND alert_key < ?))"
            args += [cursor[0], cursor[0], cursor[1]]
        rows = await self._db.fetch(
            f"{_SELECT} WHERE {where} ORDER BY window_start DESC, alert_key DESC LIMIT ?", *args, page_size + 1
        )
        page = [_alert(row, project) for row in rows[:page_size]]
        token = ""
        if len(rows) > page_size:
            token = encode_page_token([float(page[-1].window_start), page[-1].key], fingerprint)
        return page, token


_ORDER = ("tenant_id", "policy", "alert_key", "rule", "rule_when", "window_start", "window_end", "figures",
          "fired_at", "delivery", "http_status", "error", "attempts", "notify")
_COLUMNS = ", ".join(_ORDER)
_SELECT = f"SELECT {', '.join(_ORDER[1:])} FROM policy_alerts"


def _alert(row: Sequence[Any], project: str) -> FiredAlert:
    return FiredAlert(
        policy=row[0], key=row[1], rule=int(row[2]), when=row[3], window_start=float(row[4]),
        window_end=float(row[5]), values=json.loads(row[6]), fired_at=float(row[7]), delivery=row[8],
        http_status=None if row[9] is None else int(row[9]), error=row[10], attempts=int(row[11]), notify=row[12],
        project=project,
    )
