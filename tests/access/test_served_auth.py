"""`evalsi serve` with an auth section as a user runs it: the sections reach the api and ingest, both serve TLS
from auth.tls (the supervisor's readiness probe included), and credentials are required on the API and OTLP."""

from __future__ import annotations

import os
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
from evalsi.testing.issuer import ThreadedIssuer

EVALSI = str(Path(sys.executable).parent / "evalsi")
READY_TIMEOUT_S = 120.0  # seven processes on two shared cores
QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "qa.jsonl"


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


def _serve_until_ready(config: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], list[str]]:
    process = subprocess.Popen([EVALSI, "serve", "--config", str(config), "--state-dir", str(tmp_path / "state")],
                               cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in process.stderr or ()),
                     daemon=True).start()
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not any(line.startswith("ready in") for line in lines):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError("evalsi serve did not become ready:\n" + "\n".join(lines))
        time.sleep(0.2)
    return process, lines


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_github_actions_job_runs_a_gated_evaluation_with_its_own_oidc_token(tmp_path: Path) -> None:
    """Phase 2's exit criterion end to end: a job of acme/agent's main branch starts a gated run on `evalsi serve`
    with the job's own OIDC token (no stored secret), a cel: binding on its repository and ref granting runner;
    the gates decide the exit code (0 passed, 3 failed); a fork's job is refused and nothing runs."""
    http, grpc, otlp_http, otlp_grpc = free_ports(4)
    dataset = tmp_path / "qa.jsonl"
    dataset.write_text(QUICKSTART.read_text())
    with ThreadedIssuer(users={}) as issuer:
        config = tmp_path / "evalsi.yaml"
        config.write_text(yaml.safe_dump({
            "metadata": {"url": f"sqlite:///{tmp_path / 'evalsi.db'}"},
            "objects": {"url": str(tmp_path / "objects")},
            "api": {"http_port": http, "grpc_port": grpc},
            "ingest": {"http_port": otlp_http, "grpc_port": otlp_grpc},
            "workers": [{"pool": "cpu", "replicas": 1, "concurrency": 2}],
            "auth": {"jwt": {"providers": [{"name": "github", "issuer": issuer.url, "audiences": [issuer.audience],
                                            "jwks": {"discovery": True}, "allow_insecure_jwks": True}]}},
            "rbac": {"projects": {"agent-ci": {
                "runner": ['cel:jwt.repository == "acme/agent" && jwt.ref == "refs/heads/main"']}}},
        }))
        process, lines = _serve_until_ready(config, tmp_path)
        try:
            def run(gate: str, job: dict[str, str]) -> subprocess.CompletedProcess[str]:
                spec = tmp_path / "run.yaml"
                spec.write_text(yaml.safe_dump({
                    "apiVersion": "evals.si/v1alpha1", "kind": "EvalRun",
                    "metadata": {"name": "ci-gate"}, "spec": {
                        "target": {"outputs": {}}, "dataset": {"path": str(dataset)},
                        "evaluators": [{"ref": "builtin/exact-match"}], "gates": [gate]}}))
                env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALSI_", "ACTIONS_ID_TOKEN"))}
                return subprocess.run([EVALSI, "run", "-f", str(spec), "--server", f"http://127.0.0.1:{http}",
                                       "--project", "agent-ci", "--no-progress"],
                                      capture_output=True, text=True, timeout=300, cwd=tmp_path,
                                      env={**env, "XDG_CONFIG_HOME": str(tmp_path / "home"), **job})

            main = issuer.github_job(repository="acme/agent", audience=issuer.audience)
            passed = run("metric('exact-match').mean >= 0.5", main)
            assert passed.returncode == 0, passed.stdout + passed.stderr
            assert "exact-match" in passed.stdout and "0.567" in passed.stdout
            failed = run("metric('exact-match').mean >= 0.9", issuer.github_job(repository="acme/agent",
                                                                                  audience=issuer.audience))
            assert failed.returncode == 3, failed.stdout + failed.stderr
            fork = run("metric('exact-match').mean >= 0.5",
                       issuer.github_job(repository="someone/fork", audience=issuer.audience))
            assert fork.returncode == 2 and "may not" in fork.stderr, fork.stdout + fork.stderr
        finally:
            _stop(process)
    assert process.returncode == 0, "\n".join(lines)
