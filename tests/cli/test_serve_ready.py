"""`evalsi serve` as a user runs it: one "ready" line, once every service answers /readyz, with the addresses;
the OTLP ports chosen by flag (over evalsi.yaml's); the services forked from serve, each named and in its own
process group, and one that is killed forked again and ready again."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.ports import free_ports

EVALSI = str(Path(sys.executable).parent / "evalsi")
READY_TIMEOUT_S = 120.0  # seven processes on two shared cores; ready in seconds when the machine is quiet


@dataclass
class Served:
    process: subprocess.Popen[str]
    http: int
    grpc: int
    otlp_http: int
    otlp_grpc: int
    file_otlp: tuple[int, int]
    lines: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, pattern: str, timeout_s: float) -> str:
        """The first console line matching ``pattern`` (waiting for it)."""
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while True:
                for line in self.lines:
                    if re.search(pattern, line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise AssertionError(f"no line matching {pattern!r}; console:\n" + "\n".join(self.lines))
                self.changed.wait(min(left, 0.5))

    def metrics_ports(self) -> dict[str, int]:
        """Each background service's metrics port, from the addresses serve printed."""
        found = {}
        for line in self.lines:
            match = re.match(r"(\S+)\s+metrics http://127\.0\.0\.1:(\d+)/metrics", line)
            if match and match[1] != "api":
                found[match[1]] = int(match[2])
        return found


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _children(pid: int) -> dict[int, tuple[str, int]]:
    """Live children of ``pid``: pid -> (process name, process group)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found[int(entry.name)] = (comm, int(fields[2]))
    return found


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("serve")
    http, grpc, otlp_http, otlp_grpc, file_http, file_grpc = free_ports(6)
    config = tmp / "evalsi.yaml"
    config.write_text(yaml.safe_dump({
        "metadata": {"url": f"sqlite:///{tmp / 'evalsi.db'}"},
        "objects": {"url": str(tmp / "objects")},
        "api": {"http_port": http, "grpc_port": grpc},
        # The flags below win over these.
        "ingest": {"http_port": file_http, "grpc_port": file_grpc},
        "workers": [{"pool": "cpu", "replicas": 1, "concurrency": 2}],
    }))
    process = subprocess.Popen(
        [EVALSI, "serve", "--config", str(config), "--state-dir", str(tmp / "state"),
         "--otlp-http-port", str(otlp_http), "--otlp-grpc-port", str(otlp_grpc)],
        cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    served = Served(process, http, grpc, otlp_http, otlp_grpc, (file_http, file_grpc))

    def read_console() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            with served.changed:
                served.lines.append(line.rstrip("\n"))
                served.changed.notify_all()

    reader = threading.Thread(target=read_console, daemon=True)
    reader.start()
    try:
        yield served
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            reader.join(timeout=10)
    assert process.returncode == 0, "\n".join(served.lines)
    assert served.lines[-2:] == ["stopping: services drain, then nats stops", "stopped"]


def test_one_ready_line_with_every_address_once_every_service_answers(served: Served) -> None:
    ready = served.wait_for(r"^ready in", READY_TIMEOUT_S)
    # Every service answers /readyz by then: the api on its HTTP port, the others beside their /metrics.
    assert _status(f"http://127.0.0.1:{served.http}/readyz") == 200
    ports = served.metrics_ports()
    assert set(ports) == {"ingest", "policy", "scheduler-0", "worker-cpu-0", "sandboxd"}
    assert {name: _status(f"http://127.0.0.1:{port}/readyz") for name, port in ports.items()} == dict.fromkeys(
        ports, 200)
    assert re.fullmatch(r"ready in \d+\.\d s \(6 services\): .*", ready), ready
    for address in (
        f"http://127.0.0.1:{served.http} (HTTP/JSON)",
        f"grpc://127.0.0.1:{served.grpc} (gRPC)",
        f"OTLP http://127.0.0.1:{served.otlp_http} (HTTP) and 127.0.0.1:{served.otlp_grpc} (gRPC)",
        f"metrics http://127.0.0.1:{served.http}/metrics",
    ):
        assert address in ready
    assert len([line for line in served.lines if line.startswith("ready in")]) == 1


def test_the_otlp_port_flags_win_over_evalsi_yaml(served: Served) -> None:
    served.wait_for(r"^ready in", READY_TIMEOUT_S)
    body = ExportTraceServiceRequest().SerializeToString()
    request = urllib.request.Request(f"http://127.0.0.1:{served.otlp_http}/v1/traces", data=body, method="POST",
                                     headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
    assert _listening(served.otlp_grpc)
    assert not any(_listening(port) for port in served.file_otlp)  # evalsi.yaml's ports, overridden
    otlp = served.wait_for(r"^otlp ", 1)
    assert f"127.0.0.1:{served.otlp_http} (OTLP/HTTP)" in otlp and f"127.0.0.1:{served.otlp_grpc} (OTLP/gRPC)" in otlp


def test_services_are_named_forks_in_their_own_groups_and_a_killed_one_comes_back(served: Served) -> None:
    served.wait_for(r"^ready in", READY_TIMEOUT_S)
    children = _children(served.process.pid)
    names = {name for name, _ in children.values()}
    assert {"api", "ingest", "policy", "scheduler-0", "worker-cpu-0"} <= names, names
    serve_cmdline = Path(f"/proc/{served.process.pid}/cmdline").read_bytes()
    for pid, (name, group) in children.items():
        if name == "nats-server":
            continue
        assert group == pid, f"{name} does not lead its own process group"
        if b"evalsi_sandboxd" in Path(f"/proc/{pid}/cmdline").read_bytes():
            continue  # exec'd, never forked: gRPC's fork handlers are off in sandboxd from its first import
        assert Path(f"/proc/{pid}/cmdline").read_bytes() == serve_cmdline  # a fork: nothing new on its command line
    (worker,) = [pid for pid, (name, _) in children.items() if name == "worker-cpu-0"]
    os.kill(worker, signal.SIGKILL)
    served.wait_for(r"^worker-cpu-0 exited with -9 after [\d.]+ s; restarting in 0\.5 s", 30)
    port = served.metrics_ports()["worker-cpu-0"]
    deadline = time.monotonic() + 60
    while _status(f"http://127.0.0.1:{port}/readyz") != 200:
        assert time.monotonic() < deadline, "the restarted worker never answered /readyz"
        time.sleep(0.2)
    (again,) = [pid for pid, (name, _) in _children(served.process.pid).items() if name == "worker-cpu-0"]
    assert again != worker


def test_an_otlp_port_flag_equal_to_an_api_port_is_exit_2_naming_it(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    done = subprocess.run(
        [EVALSI, "serve", "--state-dir", str(tmp_path / "state"), "--http-port", str(port), "--otlp-http-port",
         str(port)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert f"the flags: ingest.http_port: {port} is also an api port; give each its own" in done.stderr
    assert not (tmp_path / "state").exists()  # refused before anything started
