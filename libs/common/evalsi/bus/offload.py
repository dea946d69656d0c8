"""Payloads over the bus's size limit travel through the object store; the message carries only a reference.

The publisher puts the serialized message in the store and sends an empty payload with the store's key in
``Evalsi-Payload-Ref`` (the type, id and trace headers stay as they are); the consume loop fetches the bytes
back before decoding, so handlers never know. Stores are any object with ``put``/``get`` (a directory or S3,
content-addressed), so a redelivered or duplicated publish writes the same object.
"""

from __future__ import annotations

from collections.abc import Mapping

from evalsi.bus.codec import PAYLOAD_REF_HEADER
from evalsi.bus.errors import PayloadTooLargeError, Permanent
from evalsi.errors import InfraError
from evalsi.stores.objects import BlobStore as ObjectStore  # what the bus needs: the content-addressed half

__all__ = ["DEFAULT_HEADROOM", "ObjectStore", "offload", "payload_limit", "resolve_payload"]

# Headers count toward the server's max_payload: keep room for ours, the trace context and a dead reason.
DEFAULT_HEADROOM = 8 * 1024


def payload_limit(max_payload: int, configured: int | None = None, headroom: int = DEFAULT_HEADROOM) -> int:
    """The largest payload sent inline: the connection's max_payload less headroom, or a smaller configured one."""
    limit = max_payload - headroom
    if configured is not None:
        limit = min(limit, configured)
    if limit <= 0:
        raise ValueError(f"payload limit {limit} is not positive (max_payload {max_payload}, headroom {headroom})")
    return limit


async def offload(data: bytes, store: ObjectStore | None, *, subject: str, limit: int) -> str:
    """Put ``data`` in the store and return its key; ``PayloadTooLargeError`` when there is no store."""
    if store is None:
        raise PayloadTooLargeError(
            f"payload of {len(data)} bytes for {subject} is over the bus limit of {limit} bytes and no object "
            "store is configured to carry it by reference"
        )
    try:
        return await store.put(data)
    except Exception as e:
        raise InfraError(f"object store put of a {len(data)}-byte payload for {subject} failed: {e}") from e


async def resolve_payload(data: bytes, headers: Mapping[str, str] | None, store: ObjectStore | None) -> bytes:
    """The message bytes: ``data`` itself, or the object its ``Evalsi-Payload-Ref`` names."""
    ref = (headers or {}).get(PAYLOAD_REF_HEADER)
    if not ref:
        return data
    if store is None:
        raise Permanent(f"payload is offloaded to {ref!r} but this consumer has no object store")
    try:
        return await store.get(ref)
    except Exception as e:
        # A store hiccup is transient (InfraError: nak and retry); a missing object ends as a dead letter
        # once deliveries run out, with this reason.
        raise InfraError(f"object store get of offloaded payload {ref!r} failed: {e}") from e
