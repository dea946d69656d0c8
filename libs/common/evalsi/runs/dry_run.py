"""``--dry-run``: a run's plan and projected tokens and cost, in one text for ``evalsi run --dry-run`` and the api's
dry-run answer (``evalsi run --server URL --dry-run``), so both say the same thing about the same spec."""

from __future__ import annotations

from collections.abc import Iterable

from evalsi.evaluators import Registry
from evalsi.runs.binding import resolve_evaluators
from evalsi.runs.plan import Plan, Projection, RecordTally, plan_run, projection
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import EvalRun


def served_dry_run_text(
    document: EvalRun, records: Iterable[Record], *, project: str, dataset: str, registry: Registry
) -> str:
    """The dry-run text of a run submitted to a server, planned exactly as its scheduler would plan it; ``records``
    are read once, one at a time, and none is kept."""

    bound = resolve_evaluators(list(document.spec.evaluators), registry)
    tally = RecordTally.for_spec(document.spec, (b.evaluator.scope for b in bound)).add_all(records)
    plan = plan_run(document, tally.records, evaluators=bound, run_id="dry-run")
    return dry_run_text(plan, projection(plan, tally), name=document.metadata.name, project=project, dataset=dataset)


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
