"""The ``evalsi-policy`` process: online policies over the completed traces ingest publishes.

    evalsi-policy --nats nats://127.0.0.1:4222 --traces-url sqlite:///.evalsi/state/traces.db \\
        --metadata-url sqlite:///.evalsi/state/evalsi.db --objects-url .evalsi/state/objects \\
        [--policy support.yaml ...] [--judges judges.yaml] [--otlp-events http://collector:4318/v1/logs]

It pulls ``traces.completed.>`` (one durable consumer, ``policy``, shared by every replica), runs each trace
through the policies of its project (applied with MonitorService and stored in the metadata store, reloaded
every ``--reload`` seconds, plus any ``--policy`` files), sends cascade stages to the worker pools
(``evaluate.<pool>``), stores the scores with the trace, sends alerts (recording each, with what became of its
webhook, in the metadata store) and promotes traces into stored datasets.
A completion whose trace is not readable yet, or whose evaluation failed on infrastructure, is retried later
(then dead-lettered after ``--max-deliver`` tries); nothing is scored as a model failure.

Every flag but ``--policy`` has an ``EVALSI_POLICY_*`` variable (shared ones ``EVALSI_*``; ``--help`` names
them). Exit codes: 0 after a clean stop, 1 on an
internal error, 2 on bad flags or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from google.protobuf import json_format
from prometheus_client import REGISTRY

from evalsi.bus import BusBroker, BusConnection, Delivery, Retryable, connect, ensure_streams, subscriptions
from evalsi.bus.v1alpha1.bus_pb2 import TraceCompleted
from evalsi.connections import Connections
from evalsi.datasets.stored import DatasetStore
from evalsi.errors import BadInputError, InfraError
from evalsi.evaluators import Registry
from evalsi.masking import mask_url
from evalsi.pack_policy import PackPolicy
from evalsi.plugins import PLUGINS_DIR, describe_plugins
from evalsi.policy import WebhookSender, compile_policy, load_policy, unset_alert_secrets
from evalsi.policy.engine import PolicyEngine, ScoreObserver
from evalsi.policy.exports import GenAiEvaluationEvents, PrometheusScores
from evalsi.policy.promotion import DatasetPromoter
from evalsi.policy.spec import CompiledPolicy
from evalsi.policy.stages import bus_stage_evaluator
from evalsi.projects import DEFAULT_PROJECT
from evalsi.service.kit import parse_flags, run_service, serve_health
from evalsi.service.lifecycle import Lifecycle
from evalsi.service.logging import ids
from evalsi.service.settings import (
    LOGGING,
    METADATA_URL,
    METRICS_PORT,
    NATS,
    NATS_CREDENTIALS,
    OBJECTS_URL,
    TRACES_URL,
    Option,
    nats_credentials,
    option,
)
from evalsi.service.settings import build_parser as build_settings_parser
from evalsi.stores import open_metadata_store, open_object_store
from evalsi.stores.traces import open_trace_store
from evalsi.v1alpha1.evaluator_pb2 import JudgeSpec

log = logging.getLogger("evalsi.policy")


OPTIONS = (
    NATS,
    NATS_CREDENTIALS,
    TRACES_URL,
    option(METADATA_URL, default="", help="metadata store holding policies applied with MonitorService, where "
           "each alert fired is recorded (ListPolicyAlerts); empty: only --policy files, alerts not recorded"),
    option(OBJECTS_URL, help="object store for promoted datasets: a directory or s3:// URL"),
    Option("--policy", repeat=True, metavar="FILE",
           help="an OnlineEvalPolicy YAML file, in force besides the stored ones"),
    Option("--judges", default="", metavar="FILE",
           help="judges for judge stages, YAML: {default: {connection: NAME, model: ...}}, naming judge connections "
           "of the workers' configuration (served workers refuse endpoints and keys; a stage's judge name is a "
           "connection name without this file)"),
    Option("--otlp-events", default="", metavar="URL", help="also export scores as gen_ai.evaluation.result "
           "events to this OTLP/HTTP logs endpoint, e.g. http://127.0.0.1:4318/v1/logs"),
    Option("--reload", float, 5.0, "seconds between reloads of the stored policies"),
    Option("--concurrency", int, 16, "completed traces evaluated at once"),
    Option("--timeout", float, 60.0, "seconds a worker pool has to answer one stage"),
    Option("--max-deliver", int, 5, "tries of one completed trace before it is dead-lettered"),
    PLUGINS_DIR,
    METRICS_PORT,
    *LOGGING,
)
DESCRIPTION = "Evaluate completed traces with online policies (OnlineEvalPolicy) and store the scores."


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    return build_settings_parser("policy", OPTIONS, description=DESCRIPTION,
                                 environ=os.environ if environ is None else environ)


def load_judges(path: str) -> dict[str, JudgeSpec]:
    """Named judges from YAML; an error names the file and the judge."""
    if not path:
        return {}
    try:
        document = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BadInputError(f"--judges {path}: {exc}") from exc
    if not isinstance(document, dict):
        raise BadInputError(f"--judges {path}: expected a mapping of judge names to judges")
    judges = {}
    for name, value in document.items():
        try:
            judges[str(name)] = json_format.ParseDict(value, JudgeSpec())
        except (json_format.ParseError, TypeError, AttributeError) as exc:
            raise BadInputError(f"--judges {path}: judge {name!r}: {exc}") from exc
    return judges


def load_files(paths: Sequence[str], registry: Registry, packs: PackPolicy | None = None) -> list[CompiledPolicy]:
    """The ``--policy`` files, compiled; an alert whose signing secret is unset here, or a stage of a pack its
    project has not enabled (``packs``, evalsi.yaml's evaluators:), is a usage error (exit 2), as applying such a
    policy through MonitorService is refused."""
    compiled = []
    for path in paths:
        policy = load_policy(path)
        compiled.append(compile_policy(policy, registry=registry, source=path))
        unset = unset_alert_secrets(policy, os.environ)
        if unset:
            raise BadInputError(f"--policy {path}: " + "\n".join(unset))
        off = packs_not_enabled(compiled[-1], registry, packs or PackPolicy())
        if off:
            raise BadInputError(f"--policy {path}: {off}")
    return compiled


def packs_not_enabled(policy: CompiledPolicy, registry: Registry, packs: PackPolicy) -> str:
    """Why ``policy`` may not run under evalsi.yaml's evaluators: section (docs/packs.md), or ''. The api
    refuses such a policy when it is applied; this catches one stored before its pack was turned off."""
    project = policy.project or DEFAULT_PROJECT
    installed = {name: pack.default_on for name, pack in registry.packs.items()}
    off = packs.not_enabled(project, (stage.bound.evaluator.pack for stage in policy.cascade.stages), installed)
    if not off:
        return ""
    return (f"project {project!r} has not enabled pack(s) {', '.join(off)} that its cascade names (enabled: "
            f"{', '.join(sorted(packs.enabled(project, installed))) or 'none'}); evaluators: in evalsi.yaml, "
            "docs/packs.md")


class StoredPolicies:
    """The policies applied through MonitorService, compiled once per generation: a reload recompiles only what
    changed, and a policy that no longer compiles is reported once, not at every reload. A policy whose cascade
    names a pack its project has not enabled (``packs``, evalsi.yaml's evaluators:, with the lists stored through
    the API over it, re-read at each reload) is not in force while that lasts, reported once each time."""

    def __init__(self, metadata: Any, registry: Registry, packs: PackPolicy | None = None) -> None:
        self._metadata = metadata
        self._registry = registry
        self._packs = packs or PackPolicy()
        self._compiled: dict[tuple[str, str, int], CompiledPolicy | None] = {}
        self._off: dict[tuple[str, str, int], str] = {}

    async def load(self) -> list[CompiledPolicy]:
        compiled: dict[tuple[str, str, int], CompiledPolicy | None] = {}
        for stored in await self._metadata.list_policies(None):
            key = (stored.project, stored.name, stored.generation)
            compiled[key] = self._compiled[key] if key in self._compiled else self._compile(stored)
        self._compiled = compiled
        packs = self._packs.with_stored(
            (row.project, row.packs, row.allowed_packs) for row in await self._metadata.list_project_packs())
        in_force, off = [], {}
        for key, policy in compiled.items():
            if policy is None:
                continue
            if reason := packs_not_enabled(policy, self._registry, packs):
                if self._off.get(key) != reason:
                    log.error("policy %s (generation %d) is not in force: %s", key[1], key[2], reason,
                              extra=ids(project=key[0], policy=key[1]))
                off[key] = reason
            else:
                in_force.append(policy)
        self._off = off
        return in_force

    def _compile(self, stored: Any) -> CompiledPolicy | None:
        try:
            policy = compile_policy(stored.policy, registry=self._registry, source=f"{stored.project}/{stored.name}")
        except BadInputError as exc:
            log.error("policy %s (generation %d) is not in force: %s", stored.name, stored.generation, exc,
                      extra=ids(project=stored.project, policy=stored.name))
            return None
        # Stored policies belong to the project they were applied in.
        return policy if policy.project else dataclasses.replace(policy, project=stored.project)


async def assemble(args: argparse.Namespace, life: Lifecycle) -> None:
    """The parts in start order; at SIGTERM the consumer stops first (finishing the traces in flight), then the
    exporters, the bus and the stores close."""
    registry = Registry.from_entry_points()
    if args.plugins_dir:  # their evaluators resolve in policies here; the workers' pools run them
        await asyncio.to_thread(describe_plugins, registry, args.plugins_dir)
    packs = Connections.from_environ().packs  # evalsi.yaml's evaluators: (evalsi serve names the file)
    files = load_files(args.policy, registry, packs)
    judges = load_judges(args.judges)
    await serve_health(life, args.metrics_port)
    traces = await life.enter("trace store", open_trace_store(args.traces_url), lambda t: t.close())
    metadata = None
    if args.metadata_url:
        metadata = await life.enter("metadata store", open_metadata_store(args.metadata_url), lambda m: m.close())
    objects = await life.enter("object store", open_object_store(args.objects_url), lambda o: o.close())
    bus = await life.enter("nats", connect(args.nats, name="evalsi-policy",
                                           credentials=nats_credentials(args.nats_credentials)),
                           BusConnection.close,
                           ready=lambda: (bus.readiness.ready, bus.readiness.reason))
    await ensure_streams(bus.js)
    observers: list[ScoreObserver] = [PrometheusScores(REGISTRY)]
    if args.otlp_events:
        exporter = GenAiEvaluationEvents.to_otlp_http(args.otlp_events, service_name="evalsi-policy")
        events = await life.enter("score events", _opened(exporter), _shut_down)
        observers.append(events)
    session = await life.enter_context("webhooks", aiohttp.ClientSession())
    engine = PolicyEngine(traces=traces, scores=traces, evaluate=bus_stage_evaluator(
        bus.nc, judges=judges, timeout_s=args.timeout, store=objects), notifier=WebhookSender(session),
        promoter=DatasetPromoter(DatasetStore(objects)), observers=observers, alerts=metadata)
    stored = StoredPolicies(metadata, registry, packs) if metadata is not None else None
    in_force_names: list[str] = []

    async def reload() -> int:
        policies = [*files, *(await stored.load() if stored is not None else [])]
        engine.set_policies(policies)
        # New windows (at start, or a changed window length) are rebuilt from the stored scores; a store
        # failure is logged by the engine and retried here at the next reload.
        await engine.restore_windows()
        names = sorted(f"{p.project or 'default'}/{p.name}" for p in policies)
        if names != in_force_names:  # say what changed, once, so an operator sees an apply take effect
            log.info("policies in force: %s", ", ".join(names) or "none")
            in_force_names[:] = names
        return len(policies)

    in_force = await reload()

    async def handle(message: TraceCompleted, _delivery: Delivery) -> None:
        try:
            await engine.handle(message)
        except InfraError as exc:  # not ready, a pool down, a store restarting: later, not a score
            raise Retryable(str(exc)) from exc

    consumer = BusBroker(bus)
    ack_wait_s = max(30.0, args.timeout * 2)
    consumer.subscribe(subscriptions.traces_completed(concurrency=args.concurrency, ack_wait_s=ack_wait_s,
                                                      max_deliver=args.max_deliver), handle)
    await life.enter_part("consumer", consumer)
    await life.spawn("reload", _reload_until_stopped(reload, args.reload, life.stopping),
                     stop=lambda task: task)
    ready = {"event": "ready", "policies": in_force, "traces_url": mask_url(args.traces_url)}
    print(json.dumps(ready), flush=True)


async def _reload_until_stopped(reload: Callable[[], Awaitable[int]], every_s: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
        if not stop.is_set():
            try:
                await reload()
            except InfraError as exc:
                log.warning("reloading policies failed, keeping the ones in force: %s", exc)


async def _opened(events: GenAiEvaluationEvents) -> GenAiEvaluationEvents:
    return events


async def _shut_down(events: GenAiEvaluationEvents) -> None:
    events.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_flags("policy", OPTIONS, argv, description=DESCRIPTION)
    return run_service("policy", partial(assemble, args), args.log_level, args.log_format)


if __name__ == "__main__":
    sys.exit(main())
