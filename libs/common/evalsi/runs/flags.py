"""Run flags in a NATS key-value bucket: workers check them to skip tasks of a cancelled run without a
database round trip, and the scheduler sets them (running, cancelled, done). Reads and writes go on through
NATS reconnects (until the publisher's deadline), so a bus restart never turns into a failed task or run."""

from __future__ import annotations

import nats.js.errors
from nats.js.api import KeyValueConfig
from nats.js.client import JetStreamContext
from nats.js.kv import KeyValue

from evalsi.bus.publisher import through_reconnects

BUCKET = "evalsi-runs"


class RunFlags:
    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext) -> RunFlags:
        try:
            kv = await js.key_value(BUCKET)
        except nats.js.errors.BucketNotFoundError:
            try:
                kv = await js.create_key_value(KeyValueConfig(bucket=BUCKET, history=1, ttl=7 * 24 * 3600))
            except nats.js.errors.APIError:  # another service created it first
                kv = await js.key_value(BUCKET)
        return cls(kv)

    async def get(self, run_id: str) -> str:
        try:
            entry = await through_reconnects(lambda: self._kv.get(run_id), f"reading run flag {run_id}")
        except nats.js.errors.KeyNotFoundError:
            return ""
        return (entry.value or b"").decode()

    async def set(self, run_id: str, flag: str) -> None:
        await through_reconnects(lambda: self._kv.put(run_id, flag.encode()), f"setting run flag {run_id}={flag}")
