"""`evalsi serve` with an auth section as a user runs it: the sections reach the api and ingest, both serve TLS
from auth.tls (the supervisor's readiness probe included), and credentials are required on the API and OTLP."""

from __future__ import annotations

import signal
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp
import yaml
from access_stack import span_batch
from certificates import Authority

from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.ports import free_ports

EVALSI = str(Path(sys.executable).parent / "evalsi")
READY_TIMEOUT_S = 120.0  # seven processes on two shared cores


async def test_evalsi_serve_enforces_auth_over_tls_on_the_api_and_ingest(tmp_path: Path) -> None:
    authority = Authority.create()
    cert_file, key_file = authority.write_server(tmp_path, "served")
    key = new_api_key()
    http, grpc, otlp_http, otlp_grpc = free_ports(4)
    config = tmp_path / "evalsi.yaml"
    config.write_text(yaml.safe_dump({
        "metadata": {"url": f"sqlite:///{tmp_path / 'evalsi.db'}"},
        "objects": {"url": str(tmp_path / "objects")},
        "api": {"http_port": http, "grpc_port": grpc},
        "ingest": {"http_port": otlp_http, "grpc_port": otlp_grpc},
        "workers": [{"pool": "cpu", "replicas": 1, "concurrency": 2}],
        "auth": {"api_keys": {"keys": [{"name": "ci", "key": hash_api_key(key), "roles": {"a": ["viewer", "ingest"]}}]},
                 "tls": {"cert_file": str(cert_file), "key_file": str(key_file)}},
    }))
    process = subprocess.Popen([EVALSI, "serve", "--config", str(config), "--state-dir", str(tmp_path / "state")],
                               cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in process.stderr or ()),
                              daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not any(line.startswith("ready in") for line in lines):
            assert process.poll() is None and time.monotonic() < deadline, "\n".join(lines)
            time.sleep(0.2)
        assert any(f"https://127.0.0.1:{http}" in line for line in lines), "\n".join(lines)
        trusted = ssl.create_default_context(cadata=authority.pem.decode())
        bearer = {"authorization": f"Bearer {key}"}
        async with aiohttp.ClientSession() as session:
            async with session.get(f"https://127.0.0.1:{http}/v1alpha1/evaluators", ssl=trusted) as answer:
                assert answer.status == 401
            async with session.get(f"https://127.0.0.1:{http}/v1alpha1/evaluators", ssl=trusted,
                                   headers=bearer) as answer:
                assert answer.status == 200
            otlp = f"https://127.0.0.1:{otlp_http}/v1/traces"
            protobuf = {"Content-Type": "application/x-protobuf"}
            async with session.post(otlp, data=span_batch(), ssl=trusted, headers=protobuf) as answer:
                assert answer.status == 401
            async with session.post(otlp, data=span_batch(), ssl=trusted, headers={**protobuf, **bearer}) as answer:
                assert answer.status == 200
            async with session.post(otlp, data=span_batch(project="b"), ssl=trusted,
                                    headers={**protobuf, **bearer}) as answer:
                assert answer.status == 403
        access_file = tmp_path / "state" / "access.yaml"
        assert access_file.stat().st_mode & 0o077 == 0
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            reader.join(timeout=10)
    assert process.returncode == 0, "\n".join(lines)
