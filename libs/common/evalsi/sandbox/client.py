"""A client of ``evalsi-sandboxd``: its sandboxes as ``SandboxSession``s, so a worker or the harness uses a remote
sandbox exactly as an in-process one.

    client = SandboxClient("unix:.evalsi/sandboxd/sandboxd.sock", project="default")
    session = await client.create(SandboxSpec(min_isolation=Level.NAMESPACED))
    result = await session.exec(["python3", "-c", "print(1)"])
    await session.destroy(); await client.close()

Statuses come back as the sandbox's own errors: FAILED_PRECONDITION ``SANDBOX_UNAVAILABLE`` as
``SandboxUnavailable`` (with the server's verdicts, asked by Probe), NOT_FOUND as ``SandboxNotFound``,
RESOURCE_EXHAUSTED as ``SandboxBusy``, INVALID_ARGUMENT as ``BadInputError``, UNAUTHENTICATED and
PERMISSION_DENIED as the gate's own errors, anything else as ``InfraError``. An
execution whose stream breaks (sandboxd gone, the connection lost) ends as a ``runner_failure`` outcome: the
infrastructure failed, never the program (it is retried, never scored).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import grpc

from evalsi.auth.principal import PermissionDenied, Unauthenticated
from evalsi.errors import BadInputError, InfraError
from evalsi.projects import PROJECT_HEADER
from evalsi.sandbox.manager import SandboxBusy, SandboxNotFound, SandboxStats, SnapshotUnsupported
from evalsi.sandbox.model import (
    ExecResult,
    IsolationReport,
    Level,
    NetworkPolicy,
    Outcome,
    OutputSink,
    ProbeVerdict,
    SandboxSession,
    SandboxSpec,
    SandboxUnavailable,
)
from evalsi.sandbox.v1alpha1 import sandbox_pb2 as pb
from evalsi.sandbox.v1alpha1 import sandbox_pb2_grpc
from evalsi.sandbox.wire import (
    egress_from_proto,
    level_from_proto,
    network_to_proto,
    report_from_proto,
    result_from_proto,
    spec_to_proto,
    verdict_from_proto,
)

__all__ = ["SANDBOXD_ENV", "RemoteSession", "SandboxClient"]

# Where sandboxd listens, for the processes `evalsi serve` starts beside it (the workers).
SANDBOXD_ENV = "EVALSI_SANDBOXD"

# Generous: a WriteFiles or ReadFiles of the server's transfer limit (64 MiB) and its envelope.
_MAX_MESSAGE = 80 * 1024 * 1024
_BROKEN = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN,
                     grpc.StatusCode.INTERNAL, grpc.StatusCode.DEADLINE_EXCEEDED})


@dataclass(frozen=True)
class _Call:
    metadata: tuple[tuple[str, str], ...]
    timeout_s: float | None


class SandboxClient:
    """One channel to sandboxd (``unix:PATH`` or ``HOST:PORT``). ``authorization`` is the header value a gated
    sandboxd expects (``Bearer evk_...``: a key of the ``sandbox`` role); ``project`` is where sandboxes live."""

    def __init__(self, address: str, *, project: str = "", authorization: str = "",
                 channel_credentials: grpc.ChannelCredentials | None = None,
                 call_timeout_s: float | None = 60.0) -> None:
        options = [("grpc.max_receive_message_length", _MAX_MESSAGE), ("grpc.max_send_message_length", _MAX_MESSAGE)]
        if channel_credentials is not None:
            self._channel = grpc.aio.secure_channel(address, channel_credentials, options=options)
        else:
            self._channel = grpc.aio.insecure_channel(address, options=options)
        self._stub = sandbox_pb2_grpc.SandboxServiceStub(self._channel)
        metadata: list[tuple[str, str]] = []
        if project:
            metadata.append((PROJECT_HEADER, project))
        if authorization:
            metadata.append(("authorization", authorization))
        self._call = _Call(tuple(metadata), call_timeout_s)
        self.project = project

    @classmethod
    def from_environment(cls, environ: Mapping[str, str], **options: Any) -> SandboxClient:
        """The client of the sandboxd ``evalsi serve`` started (``$EVALSI_SANDBOXD``)."""
        address = environ.get(SANDBOXD_ENV, "")
        if not address:
            raise InfraError(f"no sandboxd: ${SANDBOXD_ENV} is not set (evalsi serve sets it when sandboxd.enabled)")
        return cls(address, **options)

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> SandboxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _unary(self, method: Any, request: Any, *, timeout_s: float | None = None) -> Any:
        try:
            return await method(request, metadata=self._call.metadata,
                                timeout=timeout_s if timeout_s is not None else self._call.timeout_s)
        except grpc.aio.AioRpcError as exc:
            await self._raise(exc, request)

    async def _raise(self, exc: grpc.aio.AioRpcError, request: Any = None) -> NoReturn:
        code, message = exc.code(), exc.details() or ""
        if code == grpc.StatusCode.FAILED_PRECONDITION and message.startswith(SandboxUnavailable.code):
            spec = getattr(request, "spec", None)
            ladder = tuple(spec.ladder) if spec is not None else ()
            try:
                verdicts = await self.probe(ladder or None)
            except Exception:  # the refusal stands whether or not the verdicts can be fetched
                verdicts = ()
            # Unset, the server applied its own default minimum: namespaced unless its evalsi.yaml says otherwise.
            minimum = level_from_proto(spec.min_isolation) if spec is not None and spec.min_isolation else (
                Level.NAMESPACED)
            error = SandboxUnavailable(minimum, verdicts)
            error.args = (message,)
            raise error from None
        if code == grpc.StatusCode.FAILED_PRECONDITION:
            raise SnapshotUnsupported(message) from None
        if code == grpc.StatusCode.NOT_FOUND:
            raise SandboxNotFound(message) from None
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            raise SandboxBusy(message) from None
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            raise BadInputError(message) from None
        if code == grpc.StatusCode.UNAUTHENTICATED:
            raise Unauthenticated(message) from None
        if code == grpc.StatusCode.PERMISSION_DENIED:
            raise PermissionDenied(message) from None
        raise InfraError(f"sandboxd: {code.name}: {message}") from None

    async def probe(self, ladder: tuple[str, ...] | None = None) -> tuple[ProbeVerdict, ...]:
        response = await self._unary(self._stub.Probe, pb.ProbeRequest(ladder=list(ladder or ())))
        return tuple(verdict_from_proto(v) for v in response.verdicts)

    async def create(self, spec: SandboxSpec, *, lease_s: float = 0.0) -> RemoteSession:
        """A sandbox on sandboxd's strongest rung meeting ``spec.min_isolation``; ``SandboxUnavailable`` if none."""
        request = pb.CreateRequest(spec=spec_to_proto(spec), lease_s=lease_s, project=self.project)
        response = await self._unary(self._stub.Create, request)
        return RemoteSession(self, response.sandbox_id, report_from_proto(response.isolation))

    async def restore(self, snapshot_id: str, *, network: NetworkPolicy | None = None,
                      lease_s: float = 0.0) -> RemoteSession:
        request = pb.RestoreRequest(snapshot_id=snapshot_id, lease_s=lease_s, project=self.project)
        if network is not None:
            request.network.CopyFrom(network_to_proto(network))
        response = await self._unary(self._stub.Restore, request)
        return RemoteSession(self, response.sandbox_id, report_from_proto(response.isolation))


class RemoteSession:
    """One sandbox of sandboxd (``SandboxSession``), plus what only sandboxd offers: snapshot and stats."""

    def __init__(self, client: SandboxClient, sandbox_id: str, isolation: IsolationReport) -> None:
        self._client = client
        self.id = sandbox_id
        self.isolation = isolation

    async def exec(self, argv: list[str], *, stdin: bytes = b"", env: Mapping[str, str] | None = None,
                   timeout_s: float | None = None, on_output: OutputSink | None = None) -> ExecResult:
        client = self._client
        request = pb.ExecRequest(sandbox_id=self.id, argv=argv, stdin=stdin, env=dict(env or {}),
                                 timeout_s=timeout_s or 0.0, project=client.project)
        stdout: list[bytes] = []
        stderr: list[bytes] = []
        # The call's deadline is the execution's own timeout plus room for the sandbox to start and report.
        deadline = None if timeout_s is None and client._call.timeout_s is None else (
            (timeout_s or 0.0) + (client._call.timeout_s or 60.0))
        call = client._stub.Exec(request, metadata=client._call.metadata, timeout=deadline)
        try:
            async for event in call:
                if event.HasField("output"):
                    data = event.output.data
                    name = "stdout" if event.output.stream == pb.OUTPUT_STREAM_STDOUT else "stderr"
                    (stdout if name == "stdout" else stderr).append(data)
                    if on_output is not None:
                        await on_output(name, data)
                elif event.HasField("result"):
                    return result_from_proto(event.result, b"".join(stdout), b"".join(stderr))
        except grpc.aio.AioRpcError as exc:
            if exc.code() in _BROKEN:
                return self._broken(f"sandboxd: {exc.code().name}: {exc.details() or ''}", stdout, stderr)
            await client._raise(exc, request)
        return self._broken("sandboxd: the stream ended without a result", stdout, stderr)

    def _broken(self, signature: str, stdout: list[bytes], stderr: list[bytes]) -> ExecResult:
        return ExecResult(Outcome("runner_failure", signature=signature[:500]), self.isolation,
                          stdout=b"".join(stdout), stderr=b"".join(stderr))

    async def write_files(self, files: Mapping[str, bytes]) -> None:
        client = self._client
        request = pb.WriteFilesRequest(sandbox_id=self.id, project=client.project,
                                       files=[pb.File(path=path, content=data) for path, data in files.items()])
        await client._unary(client._stub.WriteFiles, request)

    async def read_files(self, paths: list[str], *, max_bytes: int) -> dict[str, bytes]:
        client = self._client
        request = pb.ReadFilesRequest(sandbox_id=self.id, paths=paths, max_bytes=max_bytes, project=client.project)
        response = await client._unary(client._stub.ReadFiles, request)
        return {item.path: item.content for item in response.files}

    async def snapshot(self) -> str:
        """Save the sandbox's writable state; the id ``SandboxClient.restore`` takes."""
        client = self._client
        response = await client._unary(client._stub.Snapshot,
                                       pb.SnapshotRequest(sandbox_id=self.id, project=client.project))
        return str(response.snapshot_id)

    async def stats(self) -> SandboxStats:
        client = self._client
        response = await client._unary(client._stub.Stats, pb.StatsRequest(sandbox_id=self.id, project=client.project))
        egress = tuple(egress_from_proto(event) for event in response.egress)
        return SandboxStats(execs=response.execs, cpu_s=response.cpu_s, wall_s=response.wall_s,
                            max_rss_bytes=response.max_rss_bytes, egress=egress)

    async def destroy(self) -> None:
        client = self._client
        await client._unary(client._stub.Destroy, pb.DestroyRequest(sandbox_id=self.id, project=client.project))


if TYPE_CHECKING:  # mypy holds RemoteSession to the protocol every in-process session implements
    def _is_a_session(session: RemoteSession) -> SandboxSession:
        return session
