"""A real evalsi-api (as its main assembles it from evalsi.yaml) behind the gate, trusting a local issuer, served
from a background thread so the CLI can be run against it in-process or as a subprocess."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.ports import free_port
from evalsi.testing.issuer import CLI_CLIENT, LocalIssuer, ThreadedIssuer

ROOT = Path(__file__).resolve().parents[2]
EVALSI = str(Path(sys.executable).parent / "evalsi")
try:
    from evalsi_api import main as api_main
except ImportError:  # until the package path is in the installed distribution
    sys.path.insert(0, str(ROOT / "services" / "api"))
    from evalsi_api import main as api_main

USERS = {"alice": {"email": "alice@example.com", "email_verified": True, "groups": ["eng"]},
         "bob": {"email": "bob@example.com", "email_verified": True, "groups": ["ops"]}}


@dataclass
class AuthStack:
    issuer: LocalIssuer
    http: str
    grpc: str
    root_key: str  # an owner's evk_ key from evalsi.yaml
    config: Path
    home: Path  # XDG_CONFIG_HOME of the commands: their credential cache

    def env(self, **extra: str) -> dict[str, str]:
        """A command's environment: no inherited EVALSI_* or GitHub variables, this stack's config home."""
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("EVALSI_", "ACTIONS_ID_TOKEN")) and k != "BROWSER"}
        return {**base, "XDG_CONFIG_HOME": str(self.home), **extra}

    def run(self, *args: str, env: Mapping[str, str] | None = None, input: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([EVALSI, *args], capture_output=True, text=True, timeout=120, input=input,
                              env=dict(env or self.env()), cwd=self.home)


def access_document(issuer: LocalIssuer, root_key: str) -> dict[str, Any]:
    return {
        "auth": {
            "jwt": {"mode": "strict", "providers": [{
                "name": "local", "issuer": issuer.url, "audiences": [issuer.audience],
                "jwks": {"discovery": True}, "allow_insecure_jwks": True,
                "claims": {"groups": "groups", "email": "email"},
            }]},
            "api_keys": {"mode": "strict", "keys": [{"name": "root", "key": hash_api_key(root_key)}]},
            "cli_login": {"issuer": issuer.url, "client_id": CLI_CLIENT},
        },
        "rbac": {"owners": ["key:root"], "projects": {
            "support": {"viewer": ["group:local/eng"], "runner": ["email:bob@example.com"]},
            # CI from one repository's main branch, with the job's own OIDC token: no stored secret.
            "agent-ci": {"runner": ['cel:jwt.repository == "acme/agent" && jwt.ref == "refs/heads/main"']},
        }},
    }


@contextmanager
def auth_stack(tmp_path: Path, *, tls: tuple[Path, Path] | None = None, **issuer_options: Any) -> Iterator[AuthStack]:
    """``tls``: a certificate and key file the api serves both ports with (auth.tls)."""
    with ThreadedIssuer(users=USERS, **issuer_options) as issuer:
        root_key = new_api_key()
        config = tmp_path / "evalsi.yaml"
        document = access_document(issuer, root_key)
        if tls is not None:
            document["auth"]["tls"] = {"cert_file": str(tls[0]), "key_file": str(tls[1])}
        config.write_text(yaml.safe_dump(document))
        http_port, grpc_port = free_port(), free_port()
        settings = api_main.parse_settings([
            "--config", str(config), "--http-port", str(http_port), "--grpc-port", str(grpc_port),
            "--nats", "nats://127.0.0.1:1",  # AuthService and the gate need no bus
            "--metadata-url", f"sqlite:///{tmp_path / 'evalsi.db'}", "--objects-url", str(tmp_path / "objects"),
            "--datasets-dir", str(tmp_path), "--grace-period", "1",
        ], environ={})  # fmt: skip
        loop = asyncio.new_event_loop()
        stop = asyncio.Event()
        started = threading.Event()

        async def serve() -> None:
            started.set()
            await api_main.serve(settings, stop=stop)

        thread = threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True)
        thread.start()
        started.wait(10)
        home = tmp_path / "home"
        home.mkdir()
        secure = "s" if tls is not None else ""
        stack = AuthStack(issuer, f"http{secure}://127.0.0.1:{http_port}", f"grpc{secure}://127.0.0.1:{grpc_port}",
                          root_key, config, home)
        try:
            _wait_until_answering(f"http://127.0.0.1:{http_port}" if tls is None else None, grpc_port)
            yield stack
        finally:
            loop.call_soon_threadsafe(stop.set)
            thread.join(30)
            loop.close()


def _wait_until_answering(http: str | None, grpc_port: int) -> None:
    """Until the api answers (a 401 on plain HTTP; with TLS, until its gRPC port accepts connections)."""
    import socket
    import time
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if http is None:
                socket.create_connection(("127.0.0.1", grpc_port), timeout=2).close()
                return
            urllib.request.urlopen(f"{http}/v1alpha1/auth/whoami", timeout=2)
            return
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"the api (gRPC port {grpc_port}) did not answer within 60 s")
