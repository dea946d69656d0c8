"""The message bus: protobuf messages over NATS JetStream (work, results, events, control, dead letters) and
core request/reply (synchronous Evaluate). See docs/bus.md.

The generated bus messages (``Task``, ``TaskResult``, ``RunControl``) live in ``evalsi.bus.v1alpha1.bus_pb2``.
"""

from evalsi.bus import subjects
from evalsi.bus.codec import (
    MSG_ID_HEADER,
    PAYLOAD_REF_HEADER,
    TYPE_HEADER,
    Delivery,
    decode,
    decode_any,
    encode,
    encode_headers,
)
from evalsi.bus.connection import BusConnection, Readiness, connect
from evalsi.bus.consumer import Consumer, ConsumerStats, Handler, retry_delay
from evalsi.bus.deadletter import (
    MaxDeliveriesWatcher,
    OnDeadLetter,
    publish_dead_letter,
    watch_max_deliveries,
)
from evalsi.bus.errors import PayloadTooLargeError, Permanent, RemoteError, Retryable, Unavailable
from evalsi.bus.offload import ObjectStore, payload_limit
from evalsi.bus.publisher import PUBLISH_DEADLINE_S, Publisher, publish, through_reconnects
from evalsi.bus.requests import RequestServer, request, serve_requests
from evalsi.bus.streams import (
    ConsumerSettings,
    StreamLimits,
    ensure_consumer,
    ensure_scheduler_consumers,
    ensure_streams,
    ensure_work_consumers,
)

__all__ = [  # noqa: RUF022 - grouped for readers
    # names
    "subjects",
    # connect
    "BusConnection",
    "Readiness",
    "connect",
    # streams and consumers
    "ConsumerSettings",
    "StreamLimits",
    "ensure_consumer",
    "ensure_scheduler_consumers",
    "ensure_streams",
    "ensure_work_consumers",
    # messages on the wire
    "Delivery",
    "MSG_ID_HEADER",
    "PAYLOAD_REF_HEADER",
    "TYPE_HEADER",
    "decode",
    "decode_any",
    "encode",
    "encode_headers",
    # publish
    "ObjectStore",
    "PUBLISH_DEADLINE_S",
    "Publisher",
    "payload_limit",
    "publish",
    "through_reconnects",
    # consume
    "Consumer",
    "ConsumerStats",
    "Handler",
    "retry_delay",
    # dead letters
    "MaxDeliveriesWatcher",
    "OnDeadLetter",
    "publish_dead_letter",
    "watch_max_deliveries",
    # request/reply
    "RequestServer",
    "request",
    "serve_requests",
    # errors
    "PayloadTooLargeError",
    "Permanent",
    "RemoteError",
    "Retryable",
    "Unavailable",
]
