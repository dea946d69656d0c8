"""Who may set packs on a served install with authentication (`evalsi serve` with API keys, as a user runs it): a
project's editor enables packs (policies.write) but may not change its allowlist, which only an owner
(install.manage) does; a viewer does neither. Each refusal is a 403 naming the action."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

import evalsi
from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.errors import BadInputError
from evalsi.ports import free_ports

EVALSI = str(Path(sys.executable).parent / "evalsi")
READY_TIMEOUT_S = 120.0
ROLES = {"owner": {}, "editor": {"support": ["editor"]}, "viewer": {"support": ["viewer"]}}


def test_an_editor_enables_packs_and_only_an_owner_changes_the_allowlist(tmp_path: Path) -> None:
    keys = {name: new_api_key() for name in ROLES}
    http, grpc_port, otlp_http, otlp_grpc = free_ports(4)
    config = tmp_path / "evalsi.yaml"
    config.write_text(yaml.safe_dump({
        "api": {"http_port": http, "grpc_port": grpc_port},
        "ingest": {"http_port": otlp_http, "grpc_port": otlp_grpc},
        "workers": [{"pool": "cpu", "replicas": 1, "concurrency": 2}],
        "sandboxd": {"enabled": False},
        "auth": {"api_keys": {"keys": [{"name": name, "key": hash_api_key(keys[name]), "roles": roles}
                                       for name, roles in ROLES.items()]}},
        "rbac": {"owners": ["key:owner"]},
        "evaluators": {"allowed_packs": ["core", "judge", "agent"]},
    }))
    process = subprocess.Popen([EVALSI, "serve", "--config", str(config), "--state-dir", str(tmp_path / "state")],
                               cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in process.stderr or ()),
                     daemon=True).start()
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not any(line.startswith("ready in") for line in lines):
            assert process.poll() is None and time.monotonic() < deadline, "\n".join(lines)
            time.sleep(0.2)

        def client(name: str) -> evalsi.Client:
            return evalsi.Client(f"http://127.0.0.1:{http}", project="support", api_key=keys[name])

        with client("editor") as editor:
            assert list(editor.set_project_packs(["core", "agent"]).enabled) == ["agent", "core"]
            with pytest.raises(BadInputError, match=r"apikey/editor may not install\.manage in project 'support'"):
                editor.set_pack_allowlist(["core"])
        with client("viewer") as viewer:
            with pytest.raises(BadInputError, match=r"apikey/viewer may not policies\.write in project 'support'"):
                viewer.set_project_packs(["core"])
            assert [p.name for p in viewer.list_evaluators().packs if p.enabled] == ["agent", "core"]
        with client("owner") as owner:
            narrowed = owner.set_pack_allowlist(["core"])
            assert (list(narrowed.allowed), list(narrowed.enabled), narrowed.allowed_stored) == (["core"], ["core"],
                                                                                                 True)
    finally:
        process.terminate()
        process.wait(timeout=60)
