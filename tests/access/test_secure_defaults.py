"""Secure by default: beyond loopback only with an auth section; --no-auth and auth: {mode: none} serve
unauthenticated and say so at every start; bearer credentials over non-loopback plaintext need allow_plaintext;
evalsi serve hands the sections to the api and ingest (a 0600 file) and the refusals come before anything
starts."""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.cli.main import cli
from evalsi.errors import BadInputError
from evalsi.gate.exposure import AccessSettings
from evalsi.ports import free_ports
from evalsi.service.config import Config
from evalsi.service.supervisor import plan_children
from evalsi_api import main as api_main
from evalsi_ingest import main as ingest_main

KEYS = {"api_keys": {"keys": [{"name": "ci", "key": hash_api_key(new_api_key()), "roles": {"a": ["runner"]}}]}}


def write_config(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "evalsi.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_evalsi_serve_refuses_a_non_loopback_host_without_auth_before_starting_anything(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 2
    assert "--host 0.0.0.0: not a loopback address, and there is no auth section" in result.output
    assert "--no-auth" in result.output and not (tmp_path / "state").exists()


def test_bearer_credentials_beyond_loopback_need_tls_or_allow_plaintext(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"auth": KEYS, "api": {"host": "0.0.0.0"}})
    result = CliRunner().invoke(cli, ["serve", "--config", str(config), "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 2
    assert "api.host 0.0.0.0: bearer tokens and API keys would cross the network in plaintext" in result.output
    assert "auth.allow_plaintext: true" in result.output
    allowed = AccessSettings.from_document({"auth": {**KEYS, "allow_plaintext": True}})
    assert allowed.check("0.0.0.0") is None and allowed.enforced


def test_a_bad_auth_section_names_its_key_path_at_load(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"auth": {"api_keys": {"keys": [{"name": "ci", "key": "evk_plaintext"}]}}})
    with pytest.raises(BadInputError, match=r"auth\.api_keys\.keys\[0\]\.key"):
        Config.load(config)
    with pytest.raises(BadInputError, match=r"rbac\.roles"):
        AccessSettings.from_document({"rbac": {"roles": [{"name": "x", "permissions": ["runs.launch"]}]}})


@pytest.mark.parametrize("how", ["flag", "variable", "mode none"])
def test_unauthenticated_on_purpose_warns_at_every_start(tmp_path: Path, how: str) -> None:
    document = {"auth": {**KEYS, "mode": "none"}} if how == "mode none" else {"auth": KEYS}
    config = str(write_config(tmp_path, document))
    argv = ["--config", config, "--host", "0.0.0.0", *(["--no-auth"] if how == "flag" else [])]
    environ = {"EVALSI_NO_AUTH": "1"} if how == "variable" else {}
    for settings in (api_main.parse_settings(argv, environ=environ).access,
                     ingest_main.settings_from_args(argv, environ=environ).access):
        assert not settings.enforced and settings.gate() is None
        warning = settings.check("0.0.0.0")
        assert warning is not None and warning.startswith("running WITHOUT AUTHENTICATION")
        assert ("auth: {mode: none}" if how == "mode none" else "--no-auth or EVALSI_NO_AUTH=1") in warning
    enforced = api_main.parse_settings(["--config", config], environ={}).access
    assert enforced.enforced == (how != "mode none")  # without the flag or variable, the section is enforced


def test_evalsi_serve_hands_the_sections_to_the_api_and_ingest_in_a_private_file(tmp_path: Path) -> None:
    config = Config.from_mapping({"auth": {**KEYS, "allow_plaintext": True}, "rbac": {"owners": ["key:ci"]}})
    children = {child.name: child for child in plan_children(config, "nats://127.0.0.1:1", tmp_path)}
    access_file = Path(children["api"].env["EVALSI_CONFIG"])
    assert children["ingest"].env["EVALSI_CONFIG"] == str(access_file)
    assert stat.S_IMODE(access_file.stat().st_mode) == 0o600
    assert yaml.safe_load(access_file.read_text()) == {"auth": {**KEYS, "allow_plaintext": True},
                                                       "rbac": {"owners": ["key:ci"]}}
    assert children["scheduler-0"].env.get("EVALSI_CONFIG") != str(access_file)  # only who serves callers
    # The api's own /metrics is the owner's then: a loopback listener without authentication for local scrapers.
    assert "--metrics-port" in children["api"].argv
    no_auth = Config.from_mapping({})
    from dataclasses import replace

    children = {child.name: child for child in plan_children(
        replace(no_auth, access=replace(no_auth.access, no_auth=True)), "nats://127.0.0.1:1", tmp_path)}
    assert children["api"].env["EVALSI_NO_AUTH"] == "1" and children["ingest"].env["EVALSI_NO_AUTH"] == "1"
    assert "--metrics-port" not in children["api"].argv  # unauthenticated: the HTTP port's /metrics is open


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_metrics_unauthenticated_only_on_the_apis_separate_loopback_listener(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"auth": KEYS})
    http_port, grpc_port, metrics_port = free_ports(3)
    process = subprocess.Popen([
        sys.executable, "-m", "evalsi_api.main", "--config", str(config), "--http-port", str(http_port),
        "--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port), "--nats", "nats://127.0.0.1:1",
        "--metadata-url", f"sqlite:///{tmp_path / 'evalsi.db'}", "--objects-url", str(tmp_path / "objects"),
        "--datasets-dir", str(tmp_path), "--grace-period", "1",
    ], stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 90  # the api imports for seconds; far longer on a loaded machine
        while True:
            try:
                healthy = _status(f"http://127.0.0.1:{http_port}/healthz") == 200
                if healthy and _status(f"http://127.0.0.1:{metrics_port}/healthz") == 200:
                    break
            except OSError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "the api never answered"
            time.sleep(0.1)
        assert _status(f"http://127.0.0.1:{http_port}/metrics") == 401  # the owner's on the api's port
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as answer:
            assert answer.status == 200 and b"# TYPE evalsi_api_requests_total counter" in answer.read()
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


async def test_listeners_built_in_code_refuse_other_machines_without_a_gate(tmp_path: Path) -> None:
    """Below the entry points' check: an ApiServer or OTLP receiver built by hand on a non-loopback address with no
    gate refuses to be built or to listen, unless its caller says it is open on purpose (--no-auth)."""
    from evalsi.api import ApiServer, ServerConfig
    from evalsi.api.table import HandlerTable
    from evalsi.ingest import ExportHandler, OtlpHttpReceiver, start_http_receiver
    from evalsi.ingest.grpc_receiver import start_grpc_receiver
    from evalsi.stores.traces import SqliteTraceStore

    table = HandlerTable({})
    with pytest.raises(BadInputError, match=r"evalsi-api on 0\.0\.0\.0: not a loopback address, and no gate"):
        ApiServer(table, ServerConfig(host="0.0.0.0", http_port=0, grpc_port=0))
    assert ApiServer(table, ServerConfig(host="0.0.0.0", http_port=0, grpc_port=0), open_on_purpose=True)
    assert ApiServer(table, ServerConfig(host="127.0.0.1", http_port=0, grpc_port=0))
    store = await SqliteTraceStore.open(tmp_path / "traces.db")
    try:
        handler = ExportHandler(store)
        with pytest.raises(BadInputError, match=r"OTLP/gRPC on 10\.1\.2\.3: not a loopback address"):
            await start_grpc_receiver(handler, "10.1.2.3", 0)
        with pytest.raises(BadInputError, match=r"OTLP/HTTP on 0\.0\.0\.0: not a loopback address"):
            await start_http_receiver(OtlpHttpReceiver(handler), "0.0.0.0", 0)
        runner, port = await start_http_receiver(OtlpHttpReceiver(handler), "0.0.0.0", 0, open_on_purpose=True)
        assert port > 0
        await runner.cleanup()
    finally:
        await store.close()
