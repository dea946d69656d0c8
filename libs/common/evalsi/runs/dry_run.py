"""``--dry-run``: a run's plan and projected tokens and cost, in one text and one JSON document for ``evalsi run
--dry-run`` and the api's dry-run answer (``evalsi run --server URL --dry-run``), so both say the same thing about
the same spec."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf import json_format
from google.protobuf.struct_pb2 import Struct

from evalsi.evaluators import Registry
from evalsi.runs.binding import resolve_evaluators
from evalsi.runs.plan import Plan, Projection, RecordTally, plan_run, projection
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun


def served_dry_run(
    document: EvalRun, records: Iterable[Record], *, project: str, dataset: str, registry: Registry
) -> tuple[str, dict[str, Any]]:
    """The dry-run text and document of a run submitted to a server, planned exactly as its scheduler would plan
    it; ``records`` are read once, one at a time, and none is kept."""

    bound = resolve_evaluators(list(document.spec.evaluators), registry)
    tally = RecordTally.for_spec(document.spec, (b.evaluator.scope for b in bound)).add_all(records)
    plan = plan_run(document, tally.records, evaluators=bound, run_id="dry-run")
    projected = projection(plan, tally)
    text = dry_run_text(plan, projected, name=document.metadata.name, project=project, dataset=dataset)
    return text, dry_run_document(plan, projected, name=document.metadata.name, project=project)


def dry_run_document(plan: Plan, projection: Projection, *, name: str, project: str) -> dict[str, Any]:
    """The plan and its projection as JSON (``--format json``)."""
    return {
        "run": name,
        "project": project,
        "samples": plan.samples,
        "shards": len(plan.shards),
        "trials": plan.trials,
        "pools": {pool: list(aliases) for pool, aliases in plan.pools.items()},
        **projection.to_dict(),
    }


def plan_from_struct(struct: Struct) -> dict[str, object]:
    """A served dry run's document as the embedded one prints it: a Struct holds every number as a double, so the
    counts (every number but the ``...Usd`` costs) come back as integers."""

    def restore(key: str, value: object) -> object:
        if isinstance(value, dict):
            return {k: restore(k, v) for k, v in value.items()}
        if isinstance(value, list):
            return [restore(key, v) for v in value]
        if isinstance(value, float) and value.is_integer() and not key.endswith("Usd"):
            return int(value)
        return value

    document = json_format.MessageToDict(struct)
    return {key: restore(key, value) for key, value in document.items()}


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.4f}"


def dry_run_text(plan: Plan, projection: Projection, *, name: str, project: str, dataset: str) -> str:
    """The plan and its projection as a person reads them; ``dataset`` names the dataset (a server passes a name
    that reveals none of its paths)."""
    stages = ", ".join(f"{stage} {n}" for stage, n in projection.tasks_by_stage.items()) or "none"
    pools = ", ".join(f"{pool} {n}" for pool, n in projection.tasks_by_pool.items())
    lines = [
        f"dry run: {name or 'the run'} (project {project}); nothing was called or stored",
        f"  dataset      {dataset}: {plan.samples} samples in {len(plan.shards)} shard(s) of up to "
        f"{plan.shard_size}",
        f"  trials       {plan.trials}",
        f"  tasks        {projection.tasks} ({stages}; by pool: {pools})",
        f"  evaluations  {projection.evaluations:,}",
    ]
    if plan.generation in ("agent", "harness"):
        lines.append(f"  target       {projection.target_calls:,} agent tasks ({plan.generation})")
    elif plan.generates:
        output = "unbounded" if projection.target_output_tokens is None else f"≤ {projection.target_output_tokens:,}"
        lines.append(
            f"  target       {projection.target_calls:,} calls, ≈ {projection.target_input_tokens:,} input tokens, "
            f"{output} output tokens, cost {_money(projection.target_cost_usd)}"
        )
    if projection.judge_calls:
        lines.append(
            f"  judges       {projection.judge_calls:,} calls, ≈ {projection.judge_input_tokens:,} input and "
            f"{projection.judge_output_tokens:,} output tokens, cost {_money(projection.judge_cost_usd)}"
        )
    lines.append(f"  projected    ≈ {projection.total_tokens:,} tokens, cost {_money(projection.total_cost_usd)}")
    budget = plan.spec.budget
    if budget.tokens or budget.usd:
        limits = []
        if budget.tokens:
            limits.append(f"{budget.tokens:,} tokens")
        if budget.usd:
            limits.append(f"${budget.usd:,.4f}")
        lines.append(f"  budget       {' and '.join(limits)}")
        if budget.tokens and projection.total_tokens > budget.tokens:
            lines.append("               the projected tokens exceed the token budget: the run would stop early")
    for item in projection.unknown:
        lines.append(f"  not projected: {item}")
    for note in projection.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)
