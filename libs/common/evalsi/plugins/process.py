"""One running plugin process: started in its venv on a private Unix socket, checked healthy, stopped.

The process gets a scrubbed environment (no provider keys: a plugin's judge calls go through the host) and its
stderr goes to a file in its private directory, of which the last few KiB travel in errors about it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from evalsi.errors import InfraError
from evalsi.plugin.v1alpha1 import plugin_pb2, plugin_pb2_grpc
from evalsi.plugins.manifest import PluginManifest
from evalsi.plugins.server import PROTOCOL, SERVICE

# The environment variables a plugin process inherits; everything else (credentials above all) stays behind.
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")
STDERR_TAIL_BYTES = 4096
_STOP_GRACE_S = 3.0


class PluginProcess:
    def __init__(self, manifest: PluginManifest, command: list[str]) -> None:
        """``command`` starts the SDK's entry point (``python -m evalsi.plugins.main`` of the plugin's venv); the
        entry point, socket and message bound are appended."""
        self.manifest = manifest
        self._dir = Path(tempfile.mkdtemp(prefix="evalsi-plugin-"))  # mkdtemp makes it 0700
        self.socket = self._dir / "plugin.sock"
        self._stderr_path = self._dir / "stderr"
        options = [("grpc.max_receive_message_length", manifest.max_message_bytes),
                   ("grpc.max_send_message_length", manifest.max_message_bytes)]
        env = {key: os.environ[key] for key in _KEPT_ENV if key in os.environ}
        env["PYTHONUNBUFFERED"] = "1"
        with open(self._stderr_path, "wb") as stderr:
            self._proc = subprocess.Popen(
                [*command, "--entrypoint", manifest.entrypoint,
                 "--socket", str(self.socket), "--max-message-bytes", str(manifest.max_message_bytes)],
                stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=env, cwd=self._dir,
                start_new_session=True,
            )
        self.channel = grpc.insecure_channel(f"unix:{self.socket}", options=options)
        self.stub = plugin_pb2_grpc.EvaluatorPluginServiceStub(self.channel)
        try:
            self.describe = self._start()
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc.poll() is None

    def stderr_tail(self) -> str:
        try:
            with open(self._stderr_path, "rb") as file:
                file.seek(0, os.SEEK_END)
                file.seek(max(0, file.tell() - STDERR_TAIL_BYTES))
                return file.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def failure(self, what: str) -> InfraError:
        """An error about this process naming the plugin, what failed, its exit status and its stderr's tail."""
        code = self._proc.poll()
        state = f"exited with status {code}" if code is not None else f"pid {self.pid} running"
        tail = self.stderr_tail()
        return InfraError(f"plugin {self.manifest.name}: {what} ({state})" + (f"; stderr: {tail}" if tail else ""))

    def _start(self) -> plugin_pb2.DescribeResponse:
        deadline = time.monotonic() + self.manifest.startup_timeout_s
        health = health_pb2_grpc.HealthStub(self.channel)
        while True:
            if not self.alive():
                raise self.failure("did not start")
            left = deadline - time.monotonic()
            if left <= 0:
                raise self.failure(f"not serving within {self.manifest.startup_timeout_s:g}s (limits.startup_timeout)")
            if self.socket.exists():
                try:
                    answer = health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=min(left, 2.0))
                    if answer.status == health_pb2.HealthCheckResponse.SERVING:
                        break
                except grpc.RpcError:
                    pass
            time.sleep(0.02)
        try:
            described = self.stub.Describe(plugin_pb2.DescribeRequest(), timeout=self.manifest.timeout_s)
        except grpc.RpcError as exc:
            raise self.failure(f"Describe failed: {exc.code().name} {exc.details()}") from None
        if described.protocol != PROTOCOL:
            raise self.failure(f"speaks plugin protocol {described.protocol}; this host speaks {PROTOCOL}")
        return described

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; the socket's directory is removed."""
        self.channel.close()
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, 15)
            try:
                self._proc.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, 9)
                self._proc.wait()
        shutil.rmtree(self._dir, ignore_errors=True)
