"""Run flags in a NATS key-value bucket: workers check them to skip tasks of a cancelled run without a
database round trip, and the scheduler sets them (running, cancelled, done)."""

from __future__ import annotations

import nats.js.errors
from nats.js.api import KeyValueConfig
from nats.js.client import JetStreamContext
from nats.js.kv import KeyValue

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
            entry = await self._kv.get(run_id)
        except nats.js.errors.KeyNotFoundError:
            return ""
        return (entry.value or b"").decode()

    async def set(self, run_id: str, flag: str) -> None:
        await self._kv.put(run_id, flag.encode())
