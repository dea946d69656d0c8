"""One entry point that generates a run's outputs for any target: a model, an agent, or the built-in harness."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from evalsi.judges import RetryPolicy
from evalsi.sandbox.access import SandboxOpener
from evalsi.targets.agents import generate_with_agent
from evalsi.targets.identity import generation_kind, target_identity
from evalsi.targets.models import Endpoints, Generation, TargetClient, UsageCallback, generate_with_model
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import HarnessSpec, Target


async def generate(
    records: Sequence[Record],
    target: Target,
    *,
    trial: int,
    seed: int = 0,
    client: TargetClient | None = None,
    concurrency: int | asyncio.Semaphore = 16,
    cancel: asyncio.Event | None = None,
    on_usage: UsageCallback | None = None,
    run_id: str = "",
    harness: HarnessSpec | None = None,
    retry: RetryPolicy | None = None,
    endpoints: Endpoints | None = None,
    sandbox: SandboxOpener | None = None,
    project: str = "",
) -> Generation:
    """Copies of ``records`` with the target's output, usage and provenance (trial, target, run) set.

    For ``outputs`` targets the records keep their own outputs and trials (from the dataset). ``client``
    is the model target's client (one is opened, and closed, when not given); ``concurrency`` bounds calls
    in flight (pass one Semaphore to bound several generate calls together); once ``cancel`` is set, calls
    not yet started end ``cancelled``. ``on_usage`` hears each answered call's usage as it arrives (for
    budgets). An agent target, or ``harness`` (the spec's) with a model target, makes each record an agent
    task (``evalsi.targets.agents``); ``retry`` sets the waits between an agent's (or the harness model's) retries.
    ``endpoints`` resolve endpoints and credentials (default: the spec's own, as embedded). Records with a harness
    environment (§11) run in sandboxes opened with ``sandbox`` in ``project`` (default: the in-process ladder).
    """
    identity = target_identity(target, harness)
    kind = generation_kind(target, harness)
    semaphore = concurrency if isinstance(concurrency, asyncio.Semaphore) else asyncio.Semaphore(max(1, concurrency))
    if kind in ("agent", "harness"):
        return await generate_with_agent(
            records, target, harness, trial=trial, seed=seed, identity=identity, semaphore=semaphore, cancel=cancel,
            on_usage=on_usage, run_id=run_id, retry=retry, endpoints=endpoints, sandbox=sandbox, project=project,
        )
    return await generate_with_model(
        records, target, trial=trial, seed=seed, identity=identity, kind=kind, semaphore=semaphore, client=client,
        cancel=cancel, on_usage=on_usage, run_id=run_id, retry=retry, endpoints=endpoints,
    )
