"""One lm-eval logged sample (a line of ``samples_<task>_<date>.jsonl``) as record rows (docs/datasets.md), pure.

- ``id`` is the sample's ``doc_id`` (``<task>/<doc_id>`` when one import holds several tasks); ``trial`` the repeat.
- ``input`` is the prompt the model was given (a chat built by ``--apply_chat_template`` as its messages).
- ``output`` is what lm-eval scored, its ``filtered_resps``: for a generation task the filtered text; for a
  multiple-choice (loglikelihood) task the choice with the highest log-likelihood, its log-likelihoods kept as
  ``lm_eval.loglikelihoods``. A rolling-loglikelihood (perplexity) sample has no output.
- ``reference`` is the target (a multiple-choice target given as the gold choice's index is that choice's text).
- ``metadata`` is the doc's fields, plus ``lm_eval.task``, ``lm_eval.doc_id``, ``lm_eval.filter``, the model when
  known, and lm-eval's per-sample metric values as ``lm_eval.<metric>``.

Repeats (a task's ``repeats: k``) are trials when the filtered responses keep them: a filter that keeps a list gives
one record per element; the ``none`` filter (lm-eval's default, which keeps the first repeat) gives one record per
raw response, the first being the one lm-eval scored. Any other filter reduces the repeats to one answer (a
majority vote, an extraction of the first): one record, the raw repeats kept as ``lm_eval.resps``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.errors import BadInputError

# A sample line's own keys: what is not one of them and holds a number is one of its metric values.
SAMPLE_KEYS = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics",
                         "doc_hash", "prompt_hash", "target_hash"})
PREFIX = "lm_eval."


@dataclass(frozen=True)
class SampleContext:
    task: str
    model: str = ""
    prefix_ids: bool = False  # several tasks in one import: ids are "<task>/<doc_id>"


def sample_rows(sample: Mapping[str, Any], context: SampleContext, where: str) -> list[dict[str, Any]]:
    """The record rows of one logged sample; ``where`` (file:line) names it in a refusal."""
    doc_id = sample.get("doc_id")
    if not isinstance(doc_id, int) or isinstance(doc_id, bool):
        raise BadInputError(f"{where}: doc_id {doc_id!r} is not an integer; is this an lm-eval samples file "
                            "(--log_samples writes samples_<task>_<date>.jsonl)?")
    requests = _requests(sample.get("arguments"), where)
    filtered = sample.get("filtered_resps")
    if not isinstance(filtered, list) or len(filtered) != len(requests):
        raise BadInputError(f"{where}: filtered_resps must be a list of one response per request "
                            f"({len(requests)}), got {_clip(filtered)}")
    kind = _kind(requests, where)
    metadata = _metadata(sample, context, doc_id)
    base: dict[str, Any] = {"id": f"{context.task}/{doc_id}" if context.prefix_ids else str(doc_id)}
    if kind == "generate_until":
        base["input"] = _prompt(requests[0][0])
        outputs = _trials(filtered[0], sample.get("resps"), str(sample.get("filter", "")))
        if len(outputs) == 1 and isinstance(sample.get("resps"), list) and str(sample.get("filter")) != "none":
            metadata[f"{PREFIX}resps"] = sample["resps"]
    elif kind == "loglikelihood":
        base["input"] = _prompt(requests[0][0])
        choices = [str(args[1]) for args in requests]
        lls = [_loglikelihood(value, where) for value in filtered]
        metadata[f"{PREFIX}choices"] = choices
        metadata[f"{PREFIX}loglikelihoods"] = lls
        outputs = [choices[max(range(len(lls)), key=lls.__getitem__)]]
    else:  # loglikelihood_rolling: a perplexity sample scores the text itself; lm-eval's metrics say how well
        base["input"] = _prompt(requests[0][0])
        outputs = [None]
    reference = _reference(sample.get("target"), kind, requests)
    rows = []
    for trial, output in enumerate(outputs):
        row = {**base, "trial": trial}
        if output is not None:
            row["output"] = output if isinstance(output, str) else _plain(output)
        if reference is not None:
            row["reference"] = reference
        row["metadata"] = metadata if trial == 0 else {**metadata, f"{PREFIX}repeat": trial}
        rows.append(row)
    return rows


def _requests(arguments: Any, where: str) -> list[list[Any]]:
    """``arguments`` as lm-eval logs them, ``{"gen_args_0": {"arg_0": ..., "arg_1": ...}, ...}``, as lists."""
    if not isinstance(arguments, dict) or not arguments:
        raise BadInputError(f"{where}: arguments must be lm-eval's {{gen_args_0: {{arg_0: ...}}}}, got "
                            f"{_clip(arguments)}")
    out = []
    for index in range(len(arguments)):
        args = arguments.get(f"gen_args_{index}")
        if not isinstance(args, dict) or not args:
            raise BadInputError(f"{where}: arguments.gen_args_{index} is missing or not a mapping")
        out.append([args.get(f"arg_{i}") for i in range(len(args))])
    return out


def _kind(requests: list[list[Any]], where: str) -> str:
    first = requests[0]
    if len(first) == 2 and isinstance(first[1], dict):
        if len(requests) != 1:
            raise BadInputError(f"{where}: a generation sample has one request, this one {len(requests)}")
        return "generate_until"
    if len(first) == 2 and all(len(r) == 2 and isinstance(r[1], str) for r in requests):
        return "loglikelihood"
    if len(first) == 1:
        return "loglikelihood_rolling"
    raise BadInputError(f"{where}: arguments are neither (context, gen_kwargs), (context, continuation) nor "
                        f"(text,): {_clip(first)}")


def _prompt(context: Any) -> Any:
    """The context; a chat prompt (``--apply_chat_template``, logged as ``[json]``) as its messages."""
    if isinstance(context, list) and len(context) == 1 and isinstance(context[0], str):
        try:
            messages = json.loads(context[0])
        except ValueError:
            return context[0]
        if isinstance(messages, list) and all(isinstance(m, dict) and "role" in m for m in messages):
            return {"messages": [{"role": str(m["role"]), "content": str(m.get("content", ""))} for m in messages]}
        return context[0]
    return context if isinstance(context, str) else _plain(context)


def _trials(filtered: Any, resps: Any, filter_name: str) -> list[Any]:
    if isinstance(filtered, list):
        return filtered or [None]
    if filter_name == "none" and isinstance(resps, list) and len(resps) == 1 and isinstance(resps[0], list):
        raw = resps[0]
        if raw and raw[0] == filtered:
            return [filtered, *raw[1:]]
    return [filtered]


def _loglikelihood(value: Any, where: str) -> float:
    """A ``[logprob, is_greedy]`` response: lm-eval logs both as strings (``["-0.47", "False"]``)."""
    number = value[0] if isinstance(value, list) and value else value
    try:
        if isinstance(number, bool) or not isinstance(number, int | float | str):
            raise ValueError(number)
        return float(number)
    except ValueError:
        raise BadInputError(f"{where}: a loglikelihood response must be [logprob, is_greedy], got "
                            f"{_clip(value)}") from None


def _reference(target: Any, kind: str, requests: Sequence[Sequence[Any]]) -> Any:
    if target is None or target == "":
        return None
    if kind == "loglikelihood":
        # A multiple-choice target is the gold choice's index, which lm-eval logs as a string ("0"), or its text.
        choices = [str(args[1]) for args in requests]
        index = str(target).strip()
        if str(target) not in choices and index.isdigit() and int(index) < len(choices):
            return choices[int(index)]
    if isinstance(target, list):
        targets = [str(t) for t in target if t not in (None, "")]
        return targets or None
    return target if isinstance(target, str) else str(target)


def _metadata(sample: Mapping[str, Any], context: SampleContext, doc_id: int) -> dict[str, Any]:
    doc = sample.get("doc")
    metadata: dict[str, Any] = {str(k): _plain(v) for k, v in doc.items()} if isinstance(doc, dict) else {}
    metadata.update({f"{PREFIX}task": context.task, f"{PREFIX}doc_id": doc_id,
                     f"{PREFIX}filter": str(sample.get("filter", ""))})
    if context.model:
        metadata[f"{PREFIX}model"] = context.model
    for key, value in sample.items():
        if key not in SAMPLE_KEYS and (value is None or isinstance(value, int | float | str | list | dict)):
            metadata[f"{PREFIX}{key}"] = _plain(value)
    return metadata


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _clip(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "..."
