"""The ``evalsi-policy`` process: online policies over the completed traces ingest publishes.

    evalsi-policy --nats nats://127.0.0.1:4222 --traces-url sqlite:///.evalsi/state/traces.db \\
        --metadata-url sqlite:///.evalsi/state/evalsi.db --objects-url .evalsi/state/objects \\
        [--policy support.yaml ...] [--judges judges.yaml] [--otlp-events http://collector:4318/v1/logs]

It pulls ``traces.completed.>`` (one durable consumer, ``policy``, shared by every replica), runs each trace
through the policies of its project (applied with MonitorService and stored in the metadata store, reloaded
every ``--reload`` seconds, plus any ``--policy`` files), sends cascade stages to the worker pools
(``evaluate.<pool>``), stores the scores with the trace, sends alerts and promotes traces into stored datasets.
A completion whose trace is not readable yet, or whose evaluation failed on infrastructure, is retried later
(then dead-lettered after ``--max-deliver`` tries); nothing is scored as a model failure.

Every flag has an ``EVALSI_*`` variable (``--help`` names them). Exit codes: 0 after a clean stop, 1 on an
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
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from google.protobuf import json_format
from prometheus_client import REGISTRY

from evalsi.bus import Consumer, Delivery, Retryable, connect, ensure_streams, subjects
from evalsi.bus.v1alpha1.bus_pb2 import TraceCompleted
from evalsi.datasets.stored import DatasetStore
from evalsi.errors import BadInputError, InfraError
from evalsi.evaluators import Registry
from evalsi.masking import mask_url
from evalsi.policy import WebhookSender, compile_policy, load_policy, unset_alert_secrets
from evalsi.policy.engine import PolicyEngine, ScoreObserver
from evalsi.policy.exports import GenAiEvaluationEvents, PrometheusScores
from evalsi.policy.promotion import DatasetPromoter
from evalsi.policy.spec import CompiledPolicy
from evalsi.policy.stages import bus_stage_evaluator
from evalsi.service.http import start_service_http
from evalsi.service.logging import configure_logging
from evalsi.stores import open_metadata_store, open_object_store
from evalsi.stores.traces import open_trace_store
from evalsi.v1alpha1.evaluator_pb2 import JudgeSpec

log = logging.getLogger("evalsi.policy")


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="evalsi-policy", allow_abbrev=False,
        description="Evaluate completed traces with online policies (OnlineEvalPolicy) and store the scores.")
    parser.add_argument("--nats", default=env("EVALSI_NATS_URL", "nats://127.0.0.1:4222"),
                        help="NATS server (EVALSI_NATS_URL)")
    parser.add_argument("--traces-url", default=env("EVALSI_TRACES_URL", "sqlite:///.evalsi/state/traces.db"),
                        help="trace store ingest writes (EVALSI_TRACES_URL): sqlite:///path or clickhouse://host/db")
    parser.add_argument("--metadata-url", default=env("EVALSI_METADATA_URL", ""),
                        help="metadata store holding policies applied with MonitorService (EVALSI_METADATA_URL); "
                        "empty: only --policy files")
    parser.add_argument("--objects-url", default=env("EVALSI_OBJECTS_URL", ".evalsi/state/objects"),
                        help="object store for promoted datasets (EVALSI_OBJECTS_URL): a directory or s3://bucket")
    parser.add_argument("--policy", action="append", default=[], metavar="FILE",
                        help="an OnlineEvalPolicy YAML file, in force besides the stored ones (repeatable)")
    parser.add_argument("--judges", default=env("EVALSI_POLICY_JUDGES", ""), metavar="FILE",
                        help="judges for judge stages, YAML: {default: {connection: NAME, model: ...}}, naming "
                        "judge connections of the workers' configuration (served workers refuse endpoints and "
                        "keys; a stage's judge name is a connection name without this file) (EVALSI_POLICY_JUDGES)")
    parser.add_argument("--otlp-events", default=env("EVALSI_OTLP_EVENTS_URL", ""), metavar="URL",
                        help="also export scores as gen_ai.evaluation.result events to this OTLP/HTTP logs "
                        "endpoint (EVALSI_OTLP_EVENTS_URL), e.g. http://127.0.0.1:4318/v1/logs")
    parser.add_argument("--reload", type=float, default=float(env("EVALSI_POLICY_RELOAD_S", "5")),
                        help="seconds between reloads of the stored policies (EVALSI_POLICY_RELOAD_S)")
    parser.add_argument("--concurrency", type=int, default=int(env("EVALSI_POLICY_CONCURRENCY", "16")),
                        help="completed traces evaluated at once (EVALSI_POLICY_CONCURRENCY)")
    parser.add_argument("--timeout", type=float, default=float(env("EVALSI_POLICY_TIMEOUT_S", "60")),
                        help="seconds a worker pool has to answer one stage (EVALSI_POLICY_TIMEOUT_S)")
    parser.add_argument("--max-deliver", type=int, default=int(env("EVALSI_POLICY_MAX_DELIVER", "5")),
                        help="tries of one completed trace before it is dead-lettered")
    parser.add_argument("--metrics-port", type=int, default=int(env("EVALSI_POLICY_METRICS_PORT", "0")),
                        help="port for /healthz, /readyz and /metrics (EVALSI_POLICY_METRICS_PORT; 0: none)")
    parser.add_argument("--log-level", default=env("EVALSI_LOG_LEVEL", "info"))
    return parser


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


def load_files(paths: Sequence[str], registry: Registry) -> list[CompiledPolicy]:
    """The ``--policy`` files, compiled; an alert whose signing secret is unset here is a usage error (exit 2),
    as applying such a policy through MonitorService is refused."""
    compiled = []
    for path in paths:
        policy = load_policy(path)
        compiled.append(compile_policy(policy, registry=registry, source=path))
        unset = unset_alert_secrets(policy, os.environ)
        if unset:
            raise BadInputError(f"--policy {path}: " + "\n".join(unset))
    return compiled


class StoredPolicies:
    """The policies applied through MonitorService, compiled once per generation: a reload recompiles only what
    changed, and a policy that no longer compiles is reported once, not at every reload."""

    def __init__(self, metadata: Any, registry: Registry) -> None:
        self._metadata = metadata
        self._registry = registry
        self._compiled: dict[tuple[str, str, int], CompiledPolicy | None] = {}

    async def load(self) -> list[CompiledPolicy]:
        compiled: dict[tuple[str, str, int], CompiledPolicy | None] = {}
        for stored in await self._metadata.list_policies(None):
            key = (stored.project, stored.name, stored.generation)
            compiled[key] = self._compiled[key] if key in self._compiled else self._compile(stored)
        self._compiled = compiled
        return [policy for policy in compiled.values() if policy is not None]

    def _compile(self, stored: Any) -> CompiledPolicy | None:
        try:
            policy = compile_policy(stored.policy, registry=self._registry, source=f"{stored.project}/{stored.name}")
        except BadInputError as exc:
            log.error("policy %s/%s (generation %d) is not in force: %s", stored.project, stored.name,
                      stored.generation, exc)
            return None
        # Stored policies belong to the project they were applied in.
        return policy if policy.project else dataclasses.replace(policy, project=stored.project)


async def serve(args: argparse.Namespace, *, stop: asyncio.Event | None = None) -> None:
    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
    registry = Registry.from_entry_points()
    files = load_files(args.policy, registry)
    judges = load_judges(args.judges)
    traces = await open_trace_store(args.traces_url)
    metadata = await open_metadata_store(args.metadata_url) if args.metadata_url else None
    objects = await open_object_store(args.objects_url)
    bus = await connect(args.nats, name="evalsi-policy")
    events = GenAiEvaluationEvents.to_otlp_http(args.otlp_events) if args.otlp_events else None
    consumer = http = None
    try:
        await ensure_streams(bus.js)
        observers: list[ScoreObserver] = [PrometheusScores(REGISTRY)]
        if events is not None:
            observers.append(events)
        async with aiohttp.ClientSession() as session:
            engine = PolicyEngine(traces=traces, scores=traces, evaluate=bus_stage_evaluator(
                bus.nc, judges=judges, timeout_s=args.timeout, store=objects), notifier=WebhookSender(session),
                promoter=DatasetPromoter(DatasetStore(objects)), observers=observers)

            stored = StoredPolicies(metadata, registry) if metadata is not None else None
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

            consumer = await Consumer(bus.js, subjects.TRACES_STREAM, subjects.POLICY_CONSUMER, "traces.completed.>",
                                      handle, message_type=TraceCompleted, concurrency=args.concurrency,
                                      ack_wait=max(30.0, args.timeout * 2), max_deliver=args.max_deliver,
                                      retry_base_s=0.5, retry_max_s=10.0).start()
            http = await start_service_http("127.0.0.1", args.metrics_port,
                                            lambda: (bus.readiness.ready, bus.readiness.reason))
            ready = {"event": "ready", "policies": in_force, "traces_url": mask_url(args.traces_url)}
            print(json.dumps(ready), flush=True)
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), args.reload)
                if not stop.is_set():
                    try:
                        await reload()
                    except InfraError as exc:
                        log.warning("reloading policies failed, keeping the ones in force: %s", exc)
            await consumer.stop()
            consumer = None
    finally:
        if consumer is not None:
            await consumer.stop()
        if http is not None:
            await http.cleanup()
        if events is not None:
            events.shutdown()
        await bus.close()
        await objects.close()
        if metadata is not None:
            await metadata.close()
        await traces.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        configure_logging(args.log_level)  # inside: an unknown --log-level is a usage error, exit 2
        asyncio.run(serve(args))
    except BadInputError as exc:
        print(f"evalsi-policy: {exc}", file=sys.stderr)
        return 2
    except InfraError as exc:
        print(f"evalsi-policy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
