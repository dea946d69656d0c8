"""Process evaluators over a trajectory's tool calls: accuracy, trajectory match, errors and loops."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Literal

from evalsi.errors import BadInputError, SkipRecord
from evalsi.evaluators import Output, evaluator
from evalsi.packs.agent._trajectory import (
    Call,
    Expected,
    arguments_match,
    edit_distance,
    expected_calls,
    tool_calls,
)
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

_LIST_LIMIT = 5


def _names(items: Sequence[Any]) -> str:
    shown = ", ".join(str(item) for item in items[:_LIST_LIMIT])
    more = len(items) - _LIST_LIMIT
    return shown + (f" and {more} more" if more > 0 else "")


def _unordered_matching(expected: Sequence[Expected], actual: Sequence[Call], match: Callable[..., bool]) -> dict:
    """A maximum one-to-one matching (expected index -> actual index), by augmenting paths."""
    candidates = [[j for j, call in enumerate(actual) if match(e, call)] for e in expected]
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in candidates[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(expected)):
        augment(i, set())
    return {i: j for j, i in owner.items()}


def _ordered_matching(expected: Sequence[Expected], actual: Sequence[Call], match: Callable[..., bool]) -> dict:
    """The longest common subsequence under ``match`` (expected index -> actual index)."""
    n, m = len(expected), len(actual)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if match(expected[i], actual[j]):
                table[i][j] = table[i + 1][j + 1] + 1
            else:
                table[i][j] = max(table[i + 1][j], table[i][j + 1])
    pairs, i, j = {}, 0, 0
    while i < n and j < m:
        if match(expected[i], actual[j]) and table[i][j] == table[i + 1][j + 1] + 1:
            pairs[i] = j
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


# --- tool-call-accuracy --------------------------------------------------------------------------------------


@evaluator(
    "builtin/tool-call-accuracy",
    version="1.0.0",
    pack="agent",
    requires=["trajectory"],
    outputs=[
        Output("precision", "number", min=0.0, max=1.0, description="Share of the agent's calls that were expected."),
        Output("recall", "number", min=0.0, max=1.0, description="Share of the expected calls the agent made."),
        Output("f1", "number", min=0.0, max=1.0, description="Harmonic mean of precision and recall."),
        Output("exact", "boolean", description="Every call expected and every expected call made, one to one."),
    ],
    params={
        "expected": "Expected calls: tool names or {name, arguments} objects; unset to read the reference's "
        "'tool_calls'.",
        "match_arguments": "Require an expected call's arguments to be a subset of the actual call's; false to "
        "match on names only.",
        "order_matters": "Match calls in order (longest common subsequence) rather than as a multiset.",
    },
)
def tool_call_accuracy(
    record: Record,
    *,
    expected: list | None = None,
    match_arguments: bool = True,
    order_matters: bool = False,
) -> dict[str, float | Score]:
    """Precision, recall and F1 of the agent's tool calls against the expected calls, with argument matching."""
    wanted = expected_calls(record, expected, "builtin/tool-call-accuracy", "tool_calls")
    if wanted is None:
        raise SkipRecord("no expected tool calls: set param 'expected' or a reference {\"tool_calls\": [...]}")
    actual = tool_calls(record.trajectory)

    def match(e: Expected, call: Call) -> bool:
        if e.name != call.name:
            return False
        return not match_arguments or e.arguments is None or arguments_match(e.arguments, call.arguments)

    pairs = (_ordered_matching if order_matters else _unordered_matching)(wanted, actual, match)
    matched = len(pairs)
    precision = matched / len(actual) if actual else 1.0
    recall = matched / len(wanted) if wanted else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    missing = [e for i, e in enumerate(wanted) if i not in pairs]
    used = set(pairs.values())
    extra = [c for j, c in enumerate(actual) if j not in used]
    recall_score = Score(number=recall)
    if missing:
        recall_score.explanation = f"not called{' in order' if order_matters else ''}: {_names(missing)}"
    precision_score = Score(number=precision)
    if extra:
        precision_score.explanation = f"unexpected: {_names(extra)}"
    exact = Score(passed=not missing and not extra)
    if not exact.passed:
        exact.explanation = "; ".join(s.explanation for s in (recall_score, precision_score) if s.explanation)
    return {"precision": precision_score, "recall": recall_score, "f1": f1, "exact": exact}


# --- trajectory-match ----------------------------------------------------------------------------------------

TrajectoryMode = Literal["exact", "in_order", "any_order", "superset", "subset"]


def _is_subsequence(needle: Sequence[str], haystack: Sequence[str]) -> bool:
    it = iter(haystack)
    return all(name in it for name in needle)


@evaluator(
    "builtin/trajectory-match",
    version="1.0.0",
    pack="agent",
    requires=["trajectory"],
    outputs=[
        Output("passed", "boolean", description="The tool-name sequence matches the expected one under the mode."),
        Output(
            "similarity",
            "number",
            min=0.0,
            max=1.0,
            description="1 - edit distance / longer length between the actual and expected name sequences.",
        ),
    ],
    params={
        "expected": "Expected tool names in order (or {name} objects); unset to read the reference's 'trajectory' "
        "or 'tool_calls'.",
        "mode": "exact: the same sequence; in_order: the expected names appear in order, extras allowed; any_order: "
        "the same names in any order; superset: every expected name appears, extras allowed; subset: the agent "
        "called nothing outside the expected names.",
    },
)
def trajectory_match(
    record: Record, *, expected: list | None = None, mode: TrajectoryMode = "exact"
) -> dict[str, float | Score]:
    """Whether the sequence of tool names matches an expected trajectory (strict, in order, unordered, super/subset)."""
    if mode not in ("exact", "in_order", "any_order", "superset", "subset"):
        raise BadInputError(
            "evaluator builtin/trajectory-match: param 'mode' must be one of exact, in_order, any_order, superset, "
            f"subset, got {mode!r}"
        )
    wanted = expected_calls(record, expected, "builtin/trajectory-match", "trajectory", "tool_calls")
    if wanted is None:
        raise SkipRecord("no expected trajectory: set param 'expected' or a reference {\"trajectory\": [...]}")
    want = [e.name for e in wanted]
    got = [c.name for c in tool_calls(record.trajectory)]
    longest = max(len(want), len(got))
    similarity = 1.0 - edit_distance(got, want) / longest if longest else 1.0
    missing = list((Counter(want) - Counter(got)).elements())
    extra = list((Counter(got) - Counter(want)).elements())
    if mode == "exact":
        ok = got == want
    elif mode == "in_order":
        ok = _is_subsequence(want, got)
    elif mode == "any_order":
        ok = not missing and not extra
    elif mode == "superset":
        ok = not missing
    else:
        ok = not extra
    passed = Score(passed=ok)
    if not ok:
        details = []
        if missing and mode != "subset":
            details.append(f"missing {_names(missing)}")
        if extra and mode in ("exact", "any_order", "subset"):
            details.append(f"unexpected {_names(extra)}")
        if not details:
            details.append("out of order")
        passed.explanation = f"{mode}: {'; '.join(details)} (called {_names(got) or 'nothing'})"
    return {"passed": passed, "similarity": similarity}


# --- tool-errors ---------------------------------------------------------------------------------------------


@evaluator(
    "builtin/tool-errors",
    version="1.0.0",
    pack="agent",
    requires=["trajectory"],
    outputs=[
        Output(
            "error_rate",
            "number",
            min=0.0,
            max=1.0,
            higher_is_better=False,
            description="Share of tool calls that errored; blocked calls are not errors.",
        ),
        Output(
            "recovered",
            "boolean",
            description="Every errored tool was later called again successfully (only when a call errored).",
        ),
    ],
)
def tool_errors(record: Record) -> dict[str, float | Score]:
    """The share of tool calls that failed (a call blocked by a gate is the agent's behaviour, not a tool error),
    and whether the agent recovered from each error."""
    calls = tool_calls(record.trajectory)
    if not calls:
        raise SkipRecord("no tool calls in the trajectory")
    failed = [(i, c) for i, c in enumerate(calls) if c.errored]
    rate = Score(number=len(failed) / len(calls))
    if failed:
        rate.explanation = "; ".join(f"{c.name}: {c.error or 'error'}" for _, c in failed[:_LIST_LIMIT])
    scores: dict[str, float | Score] = {"error_rate": rate}
    if failed:
        unrecovered = sorted(
            {
                c.name
                for i, c in failed
                if not any(later.name == c.name and not later.errored and not later.blocked for later in calls[i + 1 :])
            }
        )
        scores["recovered"] = Score(
            passed=not unrecovered,
            explanation=f"no successful call after the error: {_names(unrecovered)}" if unrecovered else "",
        )
    return scores


# --- loop-detection ------------------------------------------------------------------------------------------


@evaluator(
    "builtin/loop-detection",
    version="1.0.0",
    pack="agent",
    requires=["trajectory"],
    outputs=[Output("passed", "boolean", description="No tool call with the same arguments repeated threshold times.")],
    params={
        "threshold": "Repeats of the same tool with the same arguments that count as a loop (at least 2).",
        "window": "Also count repeats within any this many consecutive tool calls, not only back to back; unset "
        "for back to back only.",
    },
)
def loop_detection(record: Record, *, threshold: int = 3, window: int | None = None) -> Score:
    """Fails when the agent calls the same tool with the same arguments ``threshold`` times in a row (or within
    a window of calls), naming the repeated call."""
    if threshold < 2:
        raise BadInputError(f"evaluator builtin/loop-detection: param 'threshold' must be >= 2, got {threshold}")
    if window is not None and window < threshold:
        raise BadInputError(
            f"evaluator builtin/loop-detection: param 'window' ({window}) must be >= 'threshold' ({threshold})"
        )
    calls = tool_calls(record.trajectory)
    if not calls:
        raise SkipRecord("no tool calls in the trajectory")
    keys = [c.key for c in calls]
    run = 1
    for i in range(1, len(keys)):
        run = run + 1 if keys[i] == keys[i - 1] else 1
        if run >= threshold:
            return Score(passed=False, explanation=f"{keys[i]} called {run} times in a row (from call {i - run + 2})")
    if window is not None:
        for start in range(max(1, len(keys) - window + 1)):
            counts = Counter(keys[start : start + window])
            key, count = counts.most_common(1)[0]
            if count >= threshold:
                return Score(
                    passed=False,
                    explanation=f"{key} called {count} times within {window} calls (from call {start + 1})",
                )
    return Score(passed=True)


EVALUATORS = (tool_call_accuracy, trajectory_match, tool_errors, loop_detection)
