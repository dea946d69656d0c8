"""When the services are not all ready after a while, `evalsi serve` says which are not and why, once, and still
prints its "ready" line when they are."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

from evalsi.ports import free_ports
from evalsi.service.config import ApiConfig, Config
from evalsi.service.supervisor import Child, Supervisor

# A stand-in service: /readyz answers 503 with the kit's body until a file appears, then 200.
_SERVICE = textwrap.dedent("""
    import json, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    from pathlib import Path

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            ready = Path(sys.argv[2]).exists()
            body = json.dumps({"ready": ready, "reason": "" if ready else "nats: not connected"}).encode()
            self.send_response(200 if ready else 503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
""")


def test_serve_names_the_services_not_ready_once_then_says_ready(tmp_path: Path) -> None:
    api_http, api_grpc, stand_in = free_ports(3)
    flag = tmp_path / "ready-now"

    def plan(config: Config, nats_url: str, state_dir: Path) -> list[Child]:
        # --metrics-port tells the supervisor where the child's /readyz is, as for a real service.
        service = [sys.executable, "-c", _SERVICE, str(stand_in), str(flag), "--metrics-port", str(stand_in)]
        return [Child("stand-in", service, dict(os.environ), state_dir / "logs" / "stand-in.log",
                      ports=((stand_in, "stand-in /metrics"),))]

    console: list[str] = []
    config = Config(nats_url="nats://127.0.0.1:1", api=ApiConfig(http_port=api_http, grpc_port=api_grpc))
    supervisor = Supervisor(config, tmp_path / "state", echo=console.append, plan=plan, restart=False,
                            ready_notice_s=1.0)
    supervisor.start()
    try:
        deadline = time.monotonic() + 60
        while not any(line.startswith("not ready after") for line in console):
            assert time.monotonic() < deadline, console
            assert not supervisor.check_ready()
            time.sleep(0.1)
        (waiting,) = [line for line in console if line.startswith("not ready after")]
        assert f"api (nothing answers http://127.0.0.1:{api_http}/readyz yet (" in waiting
        assert f"stand-in (http://127.0.0.1:{stand_in}/readyz answered 503: nats: not connected)" in waiting
        assert waiting.endswith(f"still waiting (logs in {tmp_path / 'state' / 'logs'})")
        for _ in range(5):  # said once
            assert not supervisor.check_ready()
        assert len([line for line in console if line.startswith("not ready after")]) == 1
        # The api's port answers too (a stand-in), and the stand-in turns ready: the one ready line.
        flag.touch()
        api_child = Child("api-stand-in", [sys.executable, "-c", _SERVICE, str(api_http), str(flag)],
                          dict(os.environ), tmp_path / "state" / "logs" / "api.log")
        api_child.start()
        supervisor.children.append(api_child)  # stopped with the rest
        deadline = time.monotonic() + 60
        while not supervisor.check_ready():
            assert time.monotonic() < deadline, console
            time.sleep(0.1)
        assert console[-1].startswith("ready in ") and f"http://127.0.0.1:{api_http} (HTTP/JSON)" in console[-1]
    finally:
        supervisor.stop(grace_s=2)
