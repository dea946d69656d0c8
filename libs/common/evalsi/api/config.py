"""The API server's settings: listeners, limits and timeouts, each validated with the field named."""

from __future__ import annotations

from dataclasses import dataclass

from evalsi.errors import BadInputError
from evalsi.limits import MAX_DATASET_UPLOAD_BYTES

MIB = 1024 * 1024


@dataclass(frozen=True)
class ServerConfig:
    """Where and how the two transports listen. Port 0 picks a free port (tests)."""

    host: str = "127.0.0.1"
    http_port: int = 8080
    grpc_port: int = 8081
    # Largest request body (HTTP) or message (gRPC) accepted.
    max_request_bytes: int = 16 * MIB
    # How long in-flight calls may take to finish after SIGTERM.
    grace_period_s: float = 10.0

    def validate(self) -> None:
        """The listeners' own settings; who may listen where is the gate's (``evalsi.gate.exposure``)."""
        for name in ("http_port", "grpc_port"):
            port = getattr(self, name)
            if not 0 <= port <= 65535:
                raise BadInputError(f"{name}: {port} is not a port (0-65535; 0 picks a free one)")
        if self.http_port and self.http_port == self.grpc_port:
            raise BadInputError(f"grpc_port: {self.grpc_port} is also the http_port; give each its own port")
        if self.max_request_bytes < 1024:
            raise BadInputError(f"max_request_bytes: {self.max_request_bytes} is too small (at least 1024)")
        if self.grace_period_s < 0:
            raise BadInputError(f"grace_period_s: {self.grace_period_s} must be zero or more")


@dataclass(frozen=True)
class HandlerLimits:
    """Per-call limits of the RPC handlers."""

    # Records in one synchronous Evaluate call (bigger batches belong in a run).
    max_sync_records: int = 1000
    default_runs_page_size: int = 50
    default_results_page_size: int = 100
    max_page_size: int = 500
    # EvaluateStream: requests evaluated concurrently; responses still leave in request order.
    stream_window: int = 8
    # WatchRun re-reads the stored run this often, so a terminal state missed on the bus still ends the watch.
    watch_poll_s: float = 5.0
    # CompareRuns reads results in batches of this size.
    compare_batch_size: int = 5000
    # UploadDataset: bytes of one dataset file (spooled to disk, stored a shard at a time).
    max_dataset_upload_bytes: int = MAX_DATASET_UPLOAD_BYTES

    def validate(self) -> None:
        for name in (
            "max_sync_records",
            "default_runs_page_size",
            "default_results_page_size",
            "max_page_size",
            "stream_window",
            "compare_batch_size",
            "max_dataset_upload_bytes",
        ):
            value = getattr(self, name)
            if value < 1:
                raise BadInputError(f"{name}: {value} must be at least 1")
        if self.watch_poll_s <= 0:
            raise BadInputError(f"watch_poll_s: {self.watch_poll_s} must be positive")
