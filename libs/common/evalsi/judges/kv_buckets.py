"""Judge rate-limit buckets in a NATS JetStream key-value bucket, shared by every worker process.

One KV key per (provider, model) holds its ``BucketState`` as JSON; the key's revision (its stream sequence)
is the compare-and-swap token: ``kv.create`` for a key that does not exist yet, ``kv.update(last=revision)``
otherwise, and a wrong-revision answer means another process saved first (``save`` returns False and the
limiter recomputes from the fresh state). The bucket ``evalsi-ratelimits`` is created on first use and again
if it disappears (deleted by an operator, or lost with a NATS server's store): a vanished bucket costs only
the state it held, which the limiter then treats as a first use.

States written by one host are read by another, so the limiter must use a wall clock (``time.time``):
``RateLimiter`` does so by default for this store and refuses ``time.monotonic`` with it, because each
process's monotonic clock starts at an arbitrary point.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from dataclasses import asdict, fields

import nats.errors
import nats.js.errors
from nats.js.api import KeyValueConfig
from nats.js.client import JetStreamContext
from nats.js.kv import KeyValue

from evalsi.bus.publisher import through_reconnects
from evalsi.errors import InfraError

from .ratelimit import BucketState

__all__ = ["BUCKET", "NatsKVBucketStore", "kv_key"]

BUCKET = "evalsi-ratelimits"
log = logging.getLogger("evalsi.judges.ratelimit")

_KEY_CHAR = re.compile(r"[^-/_=.A-Za-z0-9]")
_DOTS = re.compile(r"\.{2,}")
_REQUIRED = ("requests", "tokens", "updated")
_FIELDS = tuple(f.name for f in fields(BucketState))
# What a missing stream looks like: a publish nobody answers, or a direct get nobody serves.
_BUCKET_GONE = (nats.js.errors.NoStreamResponseError, nats.errors.NoRespondersError)


def kv_key(key: str) -> str:
    """``key`` as a valid KV key: itself when it already is one, else a readable form plus a digest of the
    original, so two keys that sanitize alike (``a:b`` and ``a@b``) stay apart."""
    safe = _DOTS.sub(".", _KEY_CHAR.sub("_", key)).strip(".")
    if safe == key:
        return key
    return f"{safe or 'key'}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"


class NatsKVBucketStore:
    """A ``BucketStore`` over the JetStream KV bucket ``evalsi-ratelimits`` (see the module docstring)."""

    # RateLimiter reads this: states are shared between processes, so it needs a wall clock.
    shared_between_processes = True

    def __init__(self, js: JetStreamContext, *, bucket: str = BUCKET) -> None:
        self._js = js
        self.bucket = bucket
        self._kv: KeyValue | None = None
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, js: JetStreamContext, *, bucket: str = BUCKET) -> NatsKVBucketStore:
        """The store with its bucket ensured now, so a service fails at start rather than on a judge call."""
        store = cls(js, bucket=bucket)
        await store._bucket(None)
        return store

    async def load(self, key: str) -> tuple[BucketState | None, int]:
        name = kv_key(key)
        kv = await self._bucket(None)
        try:
            # Through reconnects: a NATS restart delays a judge call; it must not turn it into an error.
            entry = await through_reconnects(lambda: kv.get(name), f"reading {name} from {self.bucket}")
        except nats.js.errors.KeyNotFoundError:  # also a deleted key, and (for a non-direct get) no bucket
            return None, 0
        except _BUCKET_GONE:
            await self._bucket(kv)
            return None, 0
        except (nats.errors.Error, nats.js.errors.Error) as exc:
            raise self._unavailable("read", exc) from exc
        state = _decode(entry.value)
        if state is None:
            # Unreadable (another version wrote it, or a person did): start over, overwriting it by CAS.
            log.warning("rate-limit state %r in bucket %s is unreadable; resetting it", name, self.bucket)
        return state, int(entry.revision or 0)

    async def save(self, key: str, state: BucketState, revision: int) -> bool:
        name = kv_key(key)
        value = json.dumps(asdict(state), separators=(",", ":")).encode()
        kv = await self._bucket(None)
        try:
            return await through_reconnects(
                lambda: _write(kv, name, value, revision), f"writing {name} to {self.bucket}"
            )
        except _BUCKET_GONE:
            kv = await self._bucket(kv)
            if revision:  # the revision was read from the bucket that went away: the caller must reload
                return False
            try:
                return await _write(kv, name, value, 0)
            except (nats.errors.Error, nats.js.errors.Error) as exc:
                raise self._unavailable("write", exc) from exc
        except (nats.errors.Error, nats.js.errors.Error) as exc:
            raise self._unavailable("write", exc) from exc

    async def _bucket(self, gone: KeyValue | None) -> KeyValue:
        """The bucket handle; ``gone`` is a handle an operation found dead, to be replaced (once, however many
        callers noticed at the same time)."""
        async with self._lock:
            if self._kv is not None and self._kv is not gone:
                return self._kv
            try:
                try:
                    kv = await self._js.key_value(self.bucket)
                except nats.js.errors.BucketNotFoundError:
                    try:
                        kv = await self._js.create_key_value(
                            KeyValueConfig(
                                bucket=self.bucket,
                                description="Evals.si judge rate limits: token buckets per provider/model",
                                history=1,
                            )
                        )
                        if gone is not None:
                            log.warning("rate-limit bucket %s was missing; created it again", self.bucket)
                    except nats.js.errors.APIError:  # another process created it in between
                        kv = await self._js.key_value(self.bucket)
            except (nats.errors.Error, nats.js.errors.Error) as exc:
                raise self._unavailable("open", exc) from exc
            self._kv = kv
            return kv

    def _unavailable(self, what: str, exc: BaseException) -> InfraError:
        return InfraError(
            f"judge rate limits: could not {what} the NATS key-value bucket {self.bucket}: {type(exc).__name__}: {exc}"
        )


async def _write(kv: KeyValue, name: str, value: bytes, revision: int) -> bool:
    try:
        if revision:
            await kv.update(name, value, last=revision)
        else:
            await kv.create(name, value)  # also re-creates a key whose last entry is a delete marker
    except nats.js.errors.KeyWrongLastSequenceError:
        return False
    except nats.js.errors.KeyNotFoundError:  # create() raced a delete or purge: retry from a fresh load
        return False
    return True


def _decode(value: bytes | None) -> BucketState | None:
    try:
        document = json.loads(value or b"")
        if not isinstance(document, dict) or any(name not in document for name in _REQUIRED):
            return None
        return BucketState(**{name: float(document[name]) for name in _FIELDS if name in document})
    except (ValueError, TypeError):
        return None
