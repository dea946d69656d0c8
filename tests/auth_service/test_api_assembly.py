"""evalsi-api as its main assembles it from evalsi.yaml's auth, rbac and audit sections: AuthService behind the gate,
the created key authenticating, refused and changing calls in the audit log, a bad audit section refused at load."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.errors import BadInputError
from evalsi.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
try:
    from evalsi_api import main as api_main
except ImportError:  # until the package path is in the installed distribution
    sys.path.insert(0, str(ROOT / "services" / "api"))
    from evalsi_api import main as api_main


def _settings(tmp_path: Path, document: dict[str, Any]) -> Any:
    config = tmp_path / "evalsi.yaml"
    config.write_text(yaml.safe_dump(document))
    return api_main.parse_settings([
        "--config", str(config), "--http-port", str(free_port()), "--grpc-port", str(free_port()),
        "--nats", "nats://127.0.0.1:1",  # AuthService needs no bus
        "--metadata-url", f"sqlite:///{tmp_path / 'evalsi.db'}", "--objects-url", str(tmp_path / "objects"),
        "--datasets-dir", str(tmp_path), "--grace-period", "1",
    ], environ={})  # fmt: skip


async def _call(session: aiohttp.ClientSession, verb: str, url: str, secret: str, body: Any = None) -> Any:
    headers = {"authorization": f"Bearer {secret}", "x-evalsi-project": "support"}
    async with session.request(verb, url, json=body, headers=headers) as response:
        return response.status, await response.json()


async def test_the_assembled_api_serves_auth_service_behind_the_gate(tmp_path: Path) -> None:
    root = new_api_key()
    settings = _settings(tmp_path, {
        "auth": {"api_keys": {"keys": [{"name": "root", "key": hash_api_key(root)}]}},
        "rbac": {"owners": ["key:root"]},
        "audit": {"retention": "720h"},
    })
    stop = asyncio.Event()
    serving = asyncio.create_task(api_main.serve(settings, stop=stop))
    base = f"http://127.0.0.1:{settings.server.http_port}/v1alpha1/auth"
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(400):
                assert not serving.done(), serving.result()
                try:
                    async with session.get(base + "/whoami") as response:
                        if response.status == 401:
                            break
                except aiohttp.ClientConnectionError:
                    pass
                await asyncio.sleep(0.05)
            status, created = await _call(session, "POST", base + "/keys", root, {"name": "ci", "roles": ["runner"]})
            assert status == 200 and created["secret"].startswith("evk_")
            status, me = await _call(session, "GET", base + "/whoami", created["secret"])
            assert status == 200 and me["id"] == "apikey/support/ci" and me["authEnabled"] is True
            status, refused = await _call(session, "GET", base + "/audit", created["secret"])
            assert status == 403 and "may not audit.read in project 'support'" in refused["message"]
            await asyncio.sleep(0.2)  # the audit writer's batch
            status, events = await _call(session, "GET", base + "/audit", root)
            assert status == 200
            seen = [(e["principal"], e["decision"], e.get("resource", "")) for e in events["events"]]
            # Newest first; the key's creation once (AuthService records it with its definition, the gate does not).
            assert seen == [("apikey/support/ci", "deny", ""), ("apikey/root", "allow", "key ci")]
            status, everything = await _call(session, "GET", base + "/audit?allProjects=true", root)
            assert status == 200 and len(everything["events"]) == 3
            probe = everything["events"][-1]  # the oldest: the first call, before any credential
            assert (probe["principal"], probe["decision"], probe.get("project", "")) == ("anonymous", "deny", "")
            assert probe["deciding"].startswith("unauthenticated: ")
            metrics_url = f"http://127.0.0.1:{settings.server.http_port}/metrics"
            async with session.get(metrics_url, headers={"authorization": f"Bearer {root}"}) as response:
                text = await response.text()
            assert response.status == 200
            counters = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
                        if line.startswith("evalsi_audit_entries_") and "_created " not in line}
            # The first probe's 401 (no project: not in support's log), the 403 and the key's creation.
            assert counters == {"evalsi_audit_entries_written_total": 3.0, "evalsi_audit_entries_dropped_total": 0.0,
                                "evalsi_audit_entries_buffered": 0.0}, counters
    finally:
        stop.set()
        await asyncio.wait_for(serving, 20)


def test_a_bad_audit_section_is_refused_at_load(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match=r"audit\.retention: '5m' is shorter than the 1h minimum"):
        _settings(tmp_path, {"auth": {"api_keys": {"keys": []}}, "audit": {"retention": "5m"}})


async def test_without_an_auth_section_auth_service_answers_for_the_anonymous_owner(tmp_path: Path) -> None:
    settings = _settings(tmp_path, {})
    stop = asyncio.Event()
    serving = asyncio.create_task(api_main.serve(settings, stop=stop))
    base = f"http://127.0.0.1:{settings.server.http_port}/v1alpha1/auth"
    try:
        async with aiohttp.ClientSession() as session:
            me: dict[str, Any] = {}
            for _ in range(400):
                assert not serving.done(), serving.result()
                try:
                    async with session.get(base + "/whoami") as response:
                        me = await response.json()
                        break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
            assert me["kind"] == "anonymous" and me.get("authEnabled", False) is False
            assert me["roles"] == {"*": {"roles": ["owner"]}} and me["projects"] == ["default"]
            async with session.post(base + "/keys", json={"name": "later", "roles": ["viewer"]}) as response:
                created = await response.json()
            # Stored for when authentication is turned on; nobody is recorded as its creator.
            assert response.status == 200 and created["key"]["name"] == "later" and "createdBy" not in created["key"]
    finally:
        stop.set()
        await asyncio.wait_for(serving, 20)
