"""Who may publish and subscribe to what on the bus: one NATS user per service, its grants derived from the bus's
own definitions (``subjects``, ``streams``, ``subscriptions``, the KV buckets), never written out by hand.

Each grant carries why it is there, so ``docs/auth.md`` and a reviewer can check the list is the minimum that
works. What every service holds:

- ``$JS.API.STREAM.CREATE|UPDATE.<stream>`` for the bus's streams: every service calls ``ensure_streams`` at start
  (whichever starts first creates them), so none depends on another being up.
- ``_INBOX.<identity>.>`` to subscribe: the answers to its own requests (JetStream API calls, publish acks, pull
  deliveries, Evaluate replies) come back on its own inbox prefix (``BusConnection.inbox_prefix``), so no
  service reads another's replies.

A worker of pool P consumes only ``work.P`` through its durable (``work-P``: create, info, next, ack), publishes
results and its pool's dead letters, reads run flags (never sets them) and shares the judge rate-limit buckets;
it answers Evaluate requests on ``evaluate.P`` through ``allow_responses`` (a reply only to a request it
received, once). It may not publish run control, tasks, events or traces, nor read another pool's work.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.bus import subjects, subscriptions
from evalsi.bus.broker import Subscription
from evalsi.bus.credentials import inbox_prefix
from evalsi.bus.max_deliveries import ADVISORY_PREFIX
from evalsi.bus.streams import StreamLimits, stream_configs
from evalsi.judges.kv_buckets import BUCKET as RATE_LIMIT_BUCKET
from evalsi.runs.flags import BUCKET as RUN_FLAGS_BUCKET

__all__ = [
    "ADMIN",
    "SERVICES",
    "BusPermissions",
    "Grant",
    "all_identities",
    "authorization",
    "bus_permissions",
    "identity_for",
]

# The services that connect to the bus, as `evalsi serve` runs them; a worker's identity is `worker-<pool>`.
SERVICES = ("api", "ingest", "policy", "scheduler")
# The operator's user: every subject, for inspecting the bus (the nats CLI, tests); no service connects as it.
ADMIN = "admin"
_API = "$JS.API"


@dataclass(frozen=True)
class Grant:
    """One subject (wildcards allowed) a service may publish to or subscribe to, and why."""

    subject: str
    why: str


@dataclass(frozen=True)
class BusPermissions:
    """A service's NATS user: its name and what it may publish and subscribe to."""

    identity: str
    publish: tuple[Grant, ...]
    subscribe: tuple[Grant, ...]
    # Reply once to a request it received (core request/reply): the requester's inbox is not known in advance.
    allow_responses: bool = False

    def as_nats(self) -> dict[str, Any]:
        """The ``permissions`` block of this user in a nats-server configuration."""
        block: dict[str, Any] = {
            "publish": {"allow": _unique(g.subject for g in self.publish)},
            "subscribe": {"allow": _unique(g.subject for g in self.subscribe)},
        }
        if self.allow_responses:
            block["allow_responses"] = True
        return block


def identity_for(service: str, pool: str | None = None) -> str:
    """The NATS user of a service: its name, or ``worker-<pool>`` for a worker."""
    if service == "worker":
        return f"worker-{subjects.check_pool(pool or '')}"
    if service not in SERVICES:
        raise ValueError(f"unknown service {service!r}; services are {', '.join((*SERVICES, 'worker'))}")
    return service


def bus_permissions(identity: str) -> BusPermissions:
    """The grants of ``identity`` (``api``, ``ingest``, ``policy``, ``scheduler`` or ``worker-<pool>``)."""
    if identity.startswith("worker-"):
        return _worker(subjects.check_pool(identity.removeprefix("worker-")))
    builders = {"api": _api, "ingest": _ingest, "policy": _policy, "scheduler": _scheduler}
    if identity not in builders:
        raise ValueError(f"no bus identity {identity!r}; identities are {', '.join(builders)} and worker-<pool>")
    return builders[identity]()


def _common(identity: str) -> tuple[list[Grant], list[Grant]]:
    publish = [
        Grant(f"{_API}.STREAM.{verb}.{config.name}",
              "ensure_streams at start: create the bus's stream, or update its limits")
        for config in stream_configs(StreamLimits(), 1)
        for verb in ("CREATE", "UPDATE")
    ]
    subscribe = [Grant(f"{inbox_prefix(identity)}.>",
                       "its own inbox: JetStream API answers, publish acks, pull deliveries, request replies")]
    return publish, subscribe


def _consumes(subscription: Subscription, *, creates: bool) -> tuple[list[Grant], list[Grant]]:
    """What pulling from one durable takes: creating it (its filter is part of the subject, so the grant cannot
    be used to re-point the durable at other subjects), its info, the next batch, and acking its messages."""
    stream, durable = subscription.stream, subscription.durable
    publish = [
        Grant(f"{_API}.CONSUMER.INFO.{stream}.{durable}", f"bind the durable {durable} (pull_subscribe)"),
        Grant(f"{_API}.CONSUMER.MSG.NEXT.{stream}.{durable}", f"fetch the next batch of {subscription.subject}"),
        Grant(f"$JS.ACK.{stream}.{durable}.>", f"ack, nak and in-progress acks of {durable}'s messages"),
    ]
    if creates:
        publish.append(Grant(f"{_API}.CONSUMER.CREATE.{stream}.{durable}.{subscription.subject}",
                             f"create or update the durable {durable} on {subscription.subject} only"))
    return publish, []


def _kv(bucket: str, *, write: bool) -> list[Grant]:
    grants = [
        Grant(f"{_API}.STREAM.INFO.KV_{bucket}", f"open the key-value bucket {bucket}"),
        Grant(f"{_API}.STREAM.CREATE.KV_{bucket}", f"create {bucket} when this service starts first"),
        Grant(f"{_API}.STREAM.MSG.GET.KV_{bucket}", f"read a key of {bucket}"),
        Grant(f"{_API}.DIRECT.GET.KV_{bucket}.>", f"read a key of {bucket} (direct get, when the bucket allows it)"),
    ]
    if write:
        grants.append(Grant(f"$KV.{bucket}.>", f"write a key of {bucket}"))
    return grants


def _worker(pool: subjects.Pool) -> BusPermissions:
    identity = f"worker-{pool}"
    publish, subscribe = _common(identity)
    work = subscriptions.work(pool, concurrency=1, ack_wait_s=30.0, max_deliver=1)
    more, _ = _consumes(work, creates=True)
    publish += more
    publish += [
        Grant(_every(subjects.results("r")), "publish the results of its tasks (TaskResult)"),
        Grant(subjects.deadletter(pool), f"dead-letter a task of {subjects.work(pool)} no retry can fix"),
        *_kv(RUN_FLAGS_BUCKET, write=False),
        *_kv(RATE_LIMIT_BUCKET, write=True),
    ]
    subscribe.append(Grant(subjects.evaluate(pool), f"answer synchronous Evaluate requests for the {pool} pool "
                                                    f"(queue group {subjects.evaluate_queue(pool)})"))
    return BusPermissions(identity, tuple(publish), tuple(subscribe), allow_responses=True)


def _api() -> BusPermissions:
    publish, subscribe = _common("api")
    publish += [
        Grant(_every(subjects.run_control("r")), "announce a created run, cancel and resume (RunControl)"),
        Grant(_every(subjects.traces_completed("default")),
              "completed traces written through the api, for the online policies"),
        *(Grant(subjects.evaluate(pool), f"synchronous Evaluate on the {pool} pool") for pool in subjects.POOLS),
    ]
    subscribe.append(Grant(_every(subjects.run_events("r")), "WatchRun: a run's progress events"))
    return BusPermissions("api", tuple(publish), tuple(subscribe))


def _ingest() -> BusPermissions:
    publish, subscribe = _common("ingest")
    publish += [
        Grant(_every(subjects.traces_completed("default")),
              "completed traces for the online policies (TraceCompleted)"),
        Grant(_every(subjects.traces_observed(0)),
              "spans of traces another replica's partition completes (TracesObserved)"),
        Grant(f"{_API}.CONSUMER.INFO.{subjects.ASSEMBLY_STREAM}.*", "bind its partition's durable assembler-<n>"),
        Grant(f"{_API}.CONSUMER.MSG.NEXT.{subjects.ASSEMBLY_STREAM}.*", "fetch its partition's notices"),
        Grant(f"{_API}.CONSUMER.CREATE.{subjects.ASSEMBLY_STREAM}.>",
              "create its partition's durable assembler-<n> on traces.observed.<n>"),
        Grant(f"$JS.ACK.{subjects.ASSEMBLY_STREAM}.>", "ack its partition's notices"),
        Grant(subjects.deadletter("traces"), "dead-letter a notice that cannot be handled"),
    ]
    return BusPermissions("ingest", tuple(publish), tuple(subscribe))


def _policy() -> BusPermissions:
    publish, subscribe = _common("policy")
    more, _ = _consumes(subscriptions.traces_completed(concurrency=1, ack_wait_s=30.0, max_deliver=1), creates=True)
    publish += more
    publish += [
        *(Grant(subjects.evaluate(pool), f"online evaluators on the {pool} pool") for pool in subjects.POOLS),
        Grant(subjects.deadletter("traces"), "dead-letter a completed trace that cannot be handled"),
    ]
    return BusPermissions("policy", tuple(publish), tuple(subscribe))


def _scheduler() -> BusPermissions:
    publish, subscribe = _common("scheduler")
    for subscription in (subscriptions.results(), subscriptions.control(), subscriptions.dead_letters()):
        more, _ = _consumes(subscription, creates=True)
        publish += more
    publish += [
        Grant(f"{_API}.CONSUMER.DELETE.{subjects.DEADLETTER_STREAM}.*", "remove the dead letters' retired durable"),
        Grant(_every(subjects.work("cpu")), "publish tasks to every pool (Task)"),
        Grant(_every(subjects.run_events("r")), "a run's progress events (RunEvent)"),
        Grant(_every(subjects.deadletter("any")), "dead-letter results, control and work that ran out of deliveries"),
        *_kv(RUN_FLAGS_BUCKET, write=True),
    ]
    # The max-deliveries watchers copy an undeliverable message out of its work-queue stream, then delete it.
    for stream in (subjects.WORK_STREAM, subjects.RESULTS_STREAM):
        publish += [
            Grant(f"{_API}.STREAM.MSG.GET.{stream}", f"read a message of {stream} that ran out of deliveries"),
            Grant(f"{_API}.STREAM.MSG.DELETE.{stream}", f"delete it from {stream} once dead-lettered"),
        ]
    subscribe.append(Grant(f"{ADVISORY_PREFIX}.>", "JetStream's advisories of messages that ran out of deliveries"))
    return BusPermissions("scheduler", tuple(publish), tuple(subscribe))


def _every(subject: str) -> str:
    """``subject`` with its last token (a run id, project, pool or partition) as the ``*`` wildcard."""
    return subject.rsplit(".", 1)[0] + ".*"


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def all_identities(pools: Sequence[str]) -> tuple[str, ...]:
    """Every identity of a deployment whose workers serve ``pools``, and the operator's."""
    return (*SERVICES, *(identity_for("worker", pool) for pool in dict.fromkeys(pools)), ADMIN)


def authorization(passwords: Mapping[str, str]) -> dict[str, Any]:
    """The ``authorization`` block of a nats-server configuration admitting each identity with its password and
    its permissions, and nobody else."""
    users = []
    for identity, password in passwords.items():
        user: dict[str, Any] = {"user": identity, "password": password}
        if identity != ADMIN:  # the operator's user alone has no permissions block: everything is allowed
            user["permissions"] = bus_permissions(identity).as_nats()
        users.append(user)
    return {"users": users}
