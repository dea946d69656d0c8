"""A whole Evals.si stack as separate processes (bundled NATS, api, schedulers, workers), for end-to-end
tests and benchmarks: ``Stack(tmp_dir, ...).start()`` and ``.stop()``."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalsi.connections import Connections
from evalsi.service.config import ApiConfig, Config, IngestConfig, SchedulerConfig, WorkerConfig
from evalsi.service.supervisor import CrashLoop, Supervisor
from evalsi.testing._processes import distinct_free_ports

ROOT = Path(__file__).resolve().parents[4]


class Stack:
    """A running stack: its supervisor, its URLs, and a background thread that restarts crashed children."""

    def __init__(
        self,
        tmp: Path,
        *,
        schedulers: int = 1,
        cpu_workers: int = 1,
        judge_workers: int = 1,
        harness_workers: int = 1,
        restart: bool = True,
        metadata_url: str | None = None,
        objects_url: str | None = None,
        lease_ttl_s: float = 3.0,
        datasets_dir: Path | None = None,
        workers: Sequence[WorkerConfig] | None = None,
        ingest_grace_s: float = 1.0,
        traces_url: str = "",
        sandbox: Mapping[str, Any] | None = None,
        judges: Mapping[str, Any] | None = None,
        agents: Mapping[str, Any] | None = None,
        harness_tools: Sequence[str] | None = None,
        cli_agents: Mapping[str, Any] | None = None,
        evaluators: Mapping[str, Any] | None = None,
    ) -> None:
        """``judges``, ``agents``, ``harness_tools``, ``cli_agents`` and ``evaluators``: the evalsi.yaml sections of
        what the stack offers."""
        if datasets_dir is not None:
            datasets_dir.mkdir(parents=True, exist_ok=True)
        ports = distinct_free_ports(4)
        self.config = Config(
            metadata_url=metadata_url or f"sqlite:///{tmp / 'evalsi.db'}",
            objects_url=objects_url or str(tmp / "objects"),
            traces_url=traces_url,
            connections=Connections.from_mapping(judges, agents, list(harness_tools) if harness_tools else None,
                                                 where="Stack", cli_agents=cli_agents, evaluators=evaluators),
            datasets_dir=str(datasets_dir or Path.cwd()),
            api=ApiConfig(host="127.0.0.1", http_port=ports[0], grpc_port=ports[1]),
            ingest=IngestConfig(http_port=ports[2], grpc_port=ports[3], grace_s=ingest_grace_s),
            scheduler=SchedulerConfig(replicas=schedulers, lease_ttl_s=lease_ttl_s),
            sandbox=dict(sandbox or {}),
            workers=tuple(workers)
            if workers is not None
            else (
                WorkerConfig("cpu", cpu_workers, 8),
                WorkerConfig("judge", judge_workers, 8),
                *([WorkerConfig("harness", harness_workers, 8)] if harness_workers else []),
            ),
        )
        self.supervisor = Supervisor(self.config, tmp / "serve", echo=lambda line: None, restart=restart)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._supervise, daemon=True)
        self.crash_loop: CrashLoop | None = None

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.config.api.http_port}"

    @property
    def grpc(self) -> str:
        return f"grpc://127.0.0.1:{self.config.api.grpc_port}"

    def bus_options(self) -> dict[str, Any]:
        """``nats.connect`` keyword arguments of the bundled nats-server's operator user, which may do anything:
        tests inspect and feed the bus with it (every service has a user of its own, evalsi.service.bus_users)."""
        users = self.supervisor.bus_users
        return users.credentials().connect_options() if users is not None else {}

    def _supervise(self) -> None:
        while not self._stop.is_set():
            try:
                self.supervisor.supervise_once()
            except CrashLoop as exc:
                self.crash_loop = exc
                return
            time.sleep(0.2)

    def start(self, timeout_s: float = 120.0) -> Stack:  # six processes importing at once on two cores
        self.supervisor.start()
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.crash_loop is None:
            try:
                with urllib.request.urlopen(self.http + "/readyz", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        logs = self.logs()
        self.stop()  # never leave processes behind when the stack cannot start
        if self.crash_loop is not None:
            raise RuntimeError(f"the stack could not start: {self.crash_loop}")
        raise RuntimeError(f"the stack did not become ready in {timeout_s} s; logs:\n{logs}")

    def logs(self, lines: int = 40) -> str:
        out = []
        for child in self.supervisor.children:
            if child.log_path.exists():
                tail = child.log_path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {child.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def stop(self) -> None:
        # The supervisor first: once it is stopping, the thread restarts nothing more. The children that thread
        # restarted die with it (PR_SET_PDEATHSIG), so it is joined only after they were stopped gracefully.
        self.supervisor.stop(grace_s=5)
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
