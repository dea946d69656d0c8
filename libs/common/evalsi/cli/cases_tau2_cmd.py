"""``evalsi cases simulate-tau2``: tau2 tasks played by tau2's simulated user against the built-in agent, graded
by ``builtin/tau2`` (``evalsi.datasets.tau2_sim``)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click

from evalsi.cli._common import handle_errors
from evalsi.errors import BadInputError
from evalsi.judges import JudgeConfig

EXIT_ERRORS = 1


@click.command("simulate-tau2")
@click.argument("domain", metavar="tau2://DIR")
@click.option("--agent-harness", "harness_file", required=True, type=click.Path(exists=True, dir_okay=False),
              metavar="FILE", help="The agent under test: a harness config (evalsi-harness's YAML: its model, "
                                   "budget, system prompt). The domain's toolkit is added per conversation.")
@click.option("--persona-model", envvar="EVALSI_PERSONA_MODEL", metavar="MODEL", required=True,
              help="The model playing tau2's user (or EVALSI_PERSONA_MODEL).")
@click.option("--persona-provider", default="openai", show_default=True, help="Provider of --persona-model.")
@click.option("--persona-base-url", metavar="URL", help="Base URL of --persona-model's provider.")
@click.option("--persona-api-key-env", metavar="VAR", help="Environment variable holding the persona's API key.")
@click.option("--judge-model", metavar="MODEL", help="The judge of tau2's NL assertions (builtin/tau2-judged); "
                                                     "without it a task whose reward_basis names NL_ASSERTION is "
                                                     "skipped, saying so.")
@click.option("--judge-provider", default="openai", show_default=True, help="Provider of --judge-model.")
@click.option("--judge-base-url", metavar="URL", help="Base URL of --judge-model's provider.")
@click.option("--judge-api-key-env", metavar="VAR", help="Environment variable holding the judge's API key.")
@click.option("--task", "task_ids", multiple=True, metavar="ID", help="Only this task (repeatable).")
@click.option("--max-turns", default=30, show_default=True, type=click.IntRange(1, 200),
              help="The most messages the simulated user sends before the conversation ends (max_turns).")
@click.option("--output", "-o", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the simulated conversations as a records file (JSONL) that `evalsi eval` grades again.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def simulate_tau2_command(domain: str, harness_file: str, persona_model: str, persona_provider: str,
                          persona_base_url: str | None, persona_api_key_env: str | None, judge_model: str | None,
                          judge_provider: str, judge_base_url: str | None, judge_api_key_env: str | None,
                          task_ids: tuple[str, ...], max_turns: int, output: str | None, fmt: str) -> None:
    """Play each task of a tau2 domain as tau2 does, and grade it with builtin/tau2.

    tau2's user simulator is the persona model with tau2's user prompt (its guidelines and the task's scenario),
    opening on tau2's first agent message and ending at ###STOP### (or ###TRANSFER###, ###OUT-OF-SCOPE###, or
    --max-turns). The agent is the built-in agent of --agent-harness, its system prompt tau2's with the domain's
    policy, its tools the domain's toolkit at the task's initial state (tau2_<tool>, in a sandbox, one per
    conversation). The conversation is graded as tau2 grades it: DB, COMMUNICATE, ACTION, ENV_ASSERTION, and
    NL_ASSERTION with --judge-model. A conversation that could not finish (a model or the toolkit failing) is an
    error, never a score.

    Exit codes: 0 every task graded, 1 a conversation could not finish, 2 bad input.
    """
    from evalsi.datasets import load_dataset
    from evalsi.harness import load_config

    records = list(load_dataset(domain if domain.startswith("tau2://") else f"tau2://{domain}"))
    if task_ids:
        unknown = sorted(set(task_ids) - {record.id for record in records})
        if unknown:
            raise BadInputError(f"--task {', '.join(unknown)}: not in {domain}; its tasks: "
                                f"{', '.join(record.id for record in records)[:500]}")
        records = [record for record in records if record.id in task_ids]
    persona: dict[str, Any] = {"model": persona_model, "provider": persona_provider, "name": "persona"}
    if persona_base_url:
        persona["base_url"] = persona_base_url
    if persona_api_key_env:
        persona["api_key_env"] = persona_api_key_env
    judge: dict[str, Any] | None = None
    if judge_model:
        judge = {"model": judge_model, "provider": judge_provider}
        judge.update({key: value for key, value in (("base_url", judge_base_url),
                                                    ("api_key_env", judge_api_key_env)) if value})
    graded, results, errors = asyncio.run(_simulate(
        records, load_config(harness_file), JudgeConfig.from_mapping(persona, where="--persona-model"), judge,
        domain, max_turns))
    if output:
        from evalsi.harness.record import record_row

        Path(output).write_text("".join(json.dumps(record_row(r), ensure_ascii=False) + "\n" for r in graded),
                                encoding="utf-8")
    rows = [_row(result) for result in results] + [{"task": task, "error": why} for task, why in errors.items()]
    if fmt == "json":
        click.echo(json.dumps({"tasks": rows}, indent=2, ensure_ascii=False))
    else:
        for row in rows:
            shown = row.get("error") or row.get("skipped") or f"reward {row['reward']}"
            click.echo(f"{row['task']}: {shown}")
        rewards = [row["reward"] for row in rows if "reward" in row]
        if rewards:
            click.echo(f"mean reward: {sum(rewards) / len(rewards):.3f} over {len(rewards)} task(s)")
    sys.exit(EXIT_ERRORS if errors else 0)


def _row(result: Any) -> dict[str, Any]:
    scores = {score.name: score for score in result.scores}
    if "reward" not in scores:
        return {"task": result.record_id, "skipped": result.reason or "not graded"}
    return {"task": result.record_id, "reward": scores["reward"].number,
            **{name: score.passed for name, score in scores.items() if name != "reward"}}


async def _simulate(records: list, config: Any, persona: JudgeConfig, judge: dict[str, Any] | None, where: str,
                    max_turns: int) -> tuple[list, list, dict[str, str]]:
    import evalsi
    from evalsi.datasets.tau2_sim import simulate_tasks
    from evalsi.judges.panel import JudgeSet
    from evalsi.sandbox.access import LadderOpener

    async with JudgeSet({"persona": persona}, cache=False) as personas:  # a cached user would replay one answer
        graded, errors = await simulate_tasks(records, config, personas.clients["persona"], LadderOpener(),
                                              where=where, max_turns=max_turns)
    if not graded:
        return graded, [], errors
    evaluator = "builtin/tau2-judged" if judge else "builtin/tau2"
    results = await evalsi.evaluate_async(graded, [evaluator], judge=judge)
    return graded, list(results.results), errors
