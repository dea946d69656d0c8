"""One protobuf message per payload, its full type name in ``Evalsi-Type``: encode, and decode at the edge.

Handlers never see a raw NATS message: the consume loop turns it into ``(message, Delivery)`` here, and a
payload that is not the expected type, or not parseable, raises ``Permanent`` (retrying cannot fix it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message
from nats.aio.msg import Msg

from evalsi.bus.errors import Permanent

try:  # The W3C trace context comes from OpenTelemetry when its API is installed; else it is carried through.
    from opentelemetry import propagate as _otel_propagate
except ImportError:  # pragma: no cover - depends on the environment
    _otel_propagate = None  # type: ignore[assignment]

__all__ = [
    "DEAD_DELIVERIES_HEADER",
    "DEAD_REASON_HEADER",
    "DEAD_SEQ_HEADER",
    "DEAD_STREAM_HEADER",
    "DEAD_SUBJECT_HEADER",
    "ERROR_HEADER",
    "ERROR_KIND_HEADER",
    "MSG_ID_HEADER",
    "PAYLOAD_REF_HEADER",
    "TRACEPARENT_HEADER",
    "TRACESTATE_HEADER",
    "TYPE_HEADER",
    "Delivery",
    "decode",
    "decode_any",
    "delivery_from_msg",
    "encode",
    "encode_headers",
    "message_class",
    "type_name",
]

M = TypeVar("M", bound=Message)

TYPE_HEADER = "Evalsi-Type"
MSG_ID_HEADER = "Nats-Msg-Id"
PAYLOAD_REF_HEADER = "Evalsi-Payload-Ref"
TRACEPARENT_HEADER = "traceparent"
TRACESTATE_HEADER = "tracestate"
# Dead letters keep the original headers and add where the message came from and why it died.
DEAD_REASON_HEADER = "Evalsi-Dead-Reason"
DEAD_SUBJECT_HEADER = "Evalsi-Dead-Subject"
DEAD_STREAM_HEADER = "Evalsi-Dead-Stream"
DEAD_SEQ_HEADER = "Evalsi-Dead-Seq"
DEAD_DELIVERIES_HEADER = "Evalsi-Dead-Deliveries"
# Replies of core request/reply that failed.
ERROR_HEADER = "Evalsi-Error"
ERROR_KIND_HEADER = "Evalsi-Error-Kind"

_MAX_HEADER_VALUE = 1024


@dataclass(frozen=True)
class Delivery:
    """What a handler may know about the message besides its payload."""

    subject: str
    headers: Mapping[str, str] = field(default_factory=dict)
    msg_id: str | None = None
    num_delivered: int = 1
    stream: str | None = None
    stream_seq: int | None = None
    consumer: str | None = None

    @property
    def type_name(self) -> str | None:
        return self.headers.get(TYPE_HEADER)

    @property
    def traceparent(self) -> str | None:
        return self.headers.get(TRACEPARENT_HEADER)

    @property
    def tracestate(self) -> str | None:
        return self.headers.get(TRACESTATE_HEADER)


def type_name(message: Message | type[Message]) -> str:
    """The full protobuf name, e.g. ``evalsi.bus.v1alpha1.Task``."""
    return message.DESCRIPTOR.full_name


def header_value(value: str) -> str:
    """A header value safe on the wire: one line, bounded (a reason can be a long exception text)."""
    one_line = " ".join(str(value).split())
    return one_line if len(one_line) <= _MAX_HEADER_VALUE else one_line[: _MAX_HEADER_VALUE - 1] + "…"


def _trace_headers(traceparent: str | None, tracestate: str | None) -> dict[str, str]:
    carrier: dict[str, str] = {}
    if _otel_propagate is not None:
        _otel_propagate.inject(carrier)  # empty unless a span is active
    if TRACEPARENT_HEADER not in carrier and traceparent:
        carrier[TRACEPARENT_HEADER] = traceparent
        if tracestate:
            carrier[TRACESTATE_HEADER] = tracestate
    return {k: v for k, v in carrier.items() if k in (TRACEPARENT_HEADER, TRACESTATE_HEADER)}


def encode_headers(
    message: Message,
    *,
    key: str | None = None,
    headers: Mapping[str, str] | None = None,
    traceparent: str | None = None,
    tracestate: str | None = None,
) -> dict[str, str]:
    """The headers of ``message``: extra ``headers``, the trace context, ``Nats-Msg-Id`` and ``Evalsi-Type``."""
    out = {k: header_value(v) for k, v in (headers or {}).items()}
    out.update(_trace_headers(traceparent or out.get(TRACEPARENT_HEADER), tracestate or out.get(TRACESTATE_HEADER)))
    if key is not None:
        if not key or "\r" in key or "\n" in key:
            raise ValueError(f"a message key must be one non-empty line (pass None for no key), got {key!r}")
        out[MSG_ID_HEADER] = key
    out[TYPE_HEADER] = type_name(message)
    return out


def encode(
    message: Message,
    *,
    key: str | None = None,
    headers: Mapping[str, str] | None = None,
    traceparent: str | None = None,
    tracestate: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """``(payload, headers)`` for one protobuf message."""
    hdrs = encode_headers(message, key=key, headers=headers, traceparent=traceparent, tracestate=tracestate)
    return message.SerializeToString(), hdrs


def decode(data: bytes, headers: Mapping[str, str] | None, message_type: type[M]) -> M:
    """Parse ``data`` as ``message_type``; ``Permanent`` when the type header differs or the bytes do not parse."""
    expected = type_name(message_type)
    got = (headers or {}).get(TYPE_HEADER)
    if got is None:
        raise Permanent(f"message has no {TYPE_HEADER} header; expected {expected}")
    if got != expected:
        raise Permanent(f"message is {got}, expected {expected}")
    message = message_type()
    try:
        message.ParseFromString(data)
    except DecodeError as e:
        raise Permanent(f"payload does not parse as {expected}: {e}") from e
    return message


def message_class(name: str) -> type[Message] | None:
    """The generated class of a full protobuf name, when its module has been imported; else None."""
    try:
        descriptor = descriptor_pool.Default().FindMessageTypeByName(name)
    except KeyError:
        return None
    return message_factory.GetMessageClass(descriptor)


def decode_any(data: bytes, headers: Mapping[str, str] | None) -> Message | None:
    """Decode by the type named in the headers, for code that handles any message (dead letters); None when
    the type is unknown here or the bytes do not parse."""
    name = (headers or {}).get(TYPE_HEADER)
    cls = message_class(name) if name else None
    if cls is None:
        return None
    with contextlib.suppress(Permanent):
        return decode(data, headers, cls)
    return None


def delivery_from_msg(msg: Msg) -> Delivery:
    """The ``Delivery`` of a received message: JetStream metadata when it has some, else a core message."""
    headers: dict[str, str] = dict(msg.headers or {})
    meta: Any = None
    if msg.reply and msg.reply.startswith("$JS.ACK."):
        with contextlib.suppress(Exception):
            meta = msg.metadata
    if meta is None:
        return Delivery(subject=msg.subject, headers=headers, msg_id=headers.get(MSG_ID_HEADER))
    return Delivery(
        subject=msg.subject,
        headers=headers,
        msg_id=headers.get(MSG_ID_HEADER),
        num_delivered=int(meta.num_delivered),
        stream=meta.stream,
        stream_seq=int(meta.sequence.stream),
        consumer=meta.consumer,
    )
