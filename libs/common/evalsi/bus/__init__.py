"""The message bus: protobuf messages over NATS JetStream (work, results, events, control, dead letters) and
core request/reply (synchronous Evaluate). Services read it through FastStream subscribers (``BusBroker``);
docs/asyncapi.yaml is the bus's AsyncAPI document. See docs/bus.md.

The generated bus messages (``Task``, ``TaskResult``, ``RunControl``) live in ``evalsi.bus.v1alpha1.bus_pb2``.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

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
from evalsi.bus.deadletter import OnDeadLetter, publish_dead_letter
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

if TYPE_CHECKING:
    from evalsi.bus import subscriptions
    from evalsi.bus.acks import AckTable, ConsumerStats, Received, retry_delay
    from evalsi.bus.broker import BusBroker, Handler, Subscription
    from evalsi.bus.max_deliveries import MaxDeliveriesWatcher, watch_max_deliveries

# The subscriber side imports FastStream (and pydantic, ~1 s on a busy machine): only processes that consume
# pay for it, not the CLI or a process that only publishes and requests.
_SUBSCRIBER_SIDE = {
    "AckTable": "evalsi.bus.acks",
    "ConsumerStats": "evalsi.bus.acks",
    "Received": "evalsi.bus.acks",
    "retry_delay": "evalsi.bus.acks",
    "BusBroker": "evalsi.bus.broker",
    "Handler": "evalsi.bus.broker",
    "Subscription": "evalsi.bus.broker",
    "MaxDeliveriesWatcher": "evalsi.bus.max_deliveries",
    "watch_max_deliveries": "evalsi.bus.max_deliveries",
}


def __getattr__(name: str) -> Any:
    if name == "subscriptions":
        return import_module("evalsi.bus.subscriptions")
    if name in _SUBSCRIBER_SIDE:
        return getattr(import_module(_SUBSCRIBER_SIDE[name]), name)
    raise AttributeError(f"module 'evalsi.bus' has no attribute {name!r}")


__all__ = [  # noqa: RUF022 - grouped for readers
    # names
    "subjects",
    "subscriptions",
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
    # consume (FastStream subscribers with the ack table)
    "AckTable",
    "BusBroker",
    "ConsumerStats",
    "Handler",
    "Received",
    "Subscription",
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
