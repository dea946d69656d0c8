"""Safety evaluators: policy violations in a trajectory's tool calls and final output."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from evalsi.errors import BadInputError
from evalsi.evaluators import Output, evaluator
from evalsi.packs.agent._trajectory import Call, tool_calls
from evalsi.patterns import Pattern, PatternError, compile_user_pattern
from evalsi.records import canonical_json, content_text, has_content, to_value
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

NAME = "builtin/policy-violations"
_EXPLANATION_LIMIT = 20


@dataclass(frozen=True)
class Violation:
    """One broken rule: where (a step index, or None for the final output), which rule, and what happened."""

    step: int | None
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{'output' if self.step is None else f'steps[{self.step}]'} {self.rule}: {self.detail}"


@dataclass(frozen=True)
class Rules:
    """The validated rules of one binding."""

    forbidden_tools: tuple[str, ...]
    requires_before: Mapping[str, tuple[str, ...]]
    max_calls: Mapping[str, int]
    forbidden_arguments: tuple[Pattern, ...]
    forbidden_output: tuple[Pattern, ...]
    blocked_is_violation: bool


def _bad(param: str, problem: str) -> BadInputError:
    return BadInputError(f"evaluator {NAME}: param '{param}' {problem}")


def _names(param: str, values: Sequence[Any]) -> tuple[str, ...]:
    for index, value in enumerate(values):
        if not isinstance(value, str) or not value:
            raise _bad(param, f"entry {index} must be a non-empty tool name, got {value!r}")
    return tuple(values)


def _patterns(param: str, values: Sequence[Any]) -> tuple[Pattern, ...]:
    compiled = []
    for index, value in enumerate(values):
        if not isinstance(value, str) or not value:
            raise _bad(param, f"entry {index} must be a non-empty regular expression, got {value!r}")
        try:  # RE2 (linear time): the patterns come from whoever wrote the spec or the request
            compiled.append(compile_user_pattern(value, f"evaluator {NAME}: param '{param}' entry {index}"))
        except PatternError as exc:
            raise _bad(param, f"entry {index} is not a valid regular expression ({value!r}: {exc.problem})") from None
    return tuple(compiled)


def _prerequisites(given: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    rules = {}
    for tool, before in given.items():
        if not isinstance(tool, str) or not tool:
            raise _bad("requires_before", f"keys must be tool names, got {tool!r}")
        if isinstance(before, str):
            before = [before]
        if not isinstance(before, list | tuple) or not before:
            raise _bad("requires_before", f"value for {tool!r} must be a tool name or a list of them, got {before!r}")
        rules[tool] = _names(f"requires_before.{tool}", before)
    return rules


def _limits(given: Mapping[str, Any]) -> dict[str, int]:
    for tool, limit in given.items():
        if not isinstance(tool, str) or not tool:
            raise _bad("max_calls", f"keys must be tool names, got {tool!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise _bad("max_calls", f"value for {tool!r} must be a whole number >= 0, got {limit!r}")
    return dict(given)


def compile_rules(
    *,
    forbidden_tools: Sequence[Any] | None,
    requires_before: Mapping[str, Any] | None,
    max_calls: Mapping[str, Any] | None,
    forbidden_arguments: Sequence[Any] | None,
    forbidden_output: Sequence[Any] | None,
    blocked_is_violation: bool,
) -> Rules:
    """Check the params beyond their types (entries, regexes); errors are BadInputError naming the param."""
    rules = Rules(
        forbidden_tools=_names("forbidden_tools", forbidden_tools or ()),
        requires_before=_prerequisites(requires_before or {}),
        max_calls=_limits(max_calls or {}),
        forbidden_arguments=_patterns("forbidden_arguments", forbidden_arguments or ()),
        forbidden_output=_patterns("forbidden_output", forbidden_output or ()),
        blocked_is_violation=blocked_is_violation,
    )
    if not any((rules.forbidden_tools, rules.requires_before, rules.max_calls, rules.forbidden_arguments,
                rules.forbidden_output)):
        # Without a rule every record would pass: a misconfiguration, not a clean bill of health.
        raise BadInputError(
            f"evaluator {NAME}: no rules given; set at least one of forbidden_tools, requires_before, max_calls, "
            "forbidden_arguments, forbidden_output"
        )
    return rules


def _call_violations(call: Call, succeeded: set[str], counts: Counter[str], rules: Rules) -> list[Violation]:
    """What one call breaks, given the tools that succeeded before it and how many calls of each tool counted
    so far (this one included)."""
    found = []
    patterns = [p for p in rules.forbidden_tools if fnmatchcase(call.name, p)]
    if patterns:
        found.append(Violation(call.step, "forbidden_tools", f"called {call.name} (matches {patterns[0]!r})"))
    missing = [tool for tool in rules.requires_before.get(call.name, ()) if tool not in succeeded]
    if missing:
        found.append(Violation(
            call.step, "requires_before", f"called {call.name} before a successful {' and '.join(missing)}"
        ))
    limit = rules.max_calls.get(call.name)
    if limit is not None and counts[call.name] > limit:
        found.append(Violation(call.step, "max_calls", f"call {counts[call.name]} of {call.name}, over {limit}"))
    if rules.forbidden_arguments and call.arguments is not None:
        arguments = canonical_json(call.arguments)
        for pattern in rules.forbidden_arguments:
            # The pattern, never the matched text: the match is often the secret the rule protects.
            if pattern.search(arguments):
                found.append(Violation(
                    call.step, "forbidden_arguments", f"{call.name} arguments match {pattern.pattern!r}"
                ))
    return found


def find_violations(record: Record, rules: Rules) -> list[Violation]:
    """Every violation in the record's tool calls (in call order), then in its final output."""
    found: list[Violation] = []
    counts: Counter[str] = Counter()
    succeeded: set[str] = set()
    for call in tool_calls(record.trajectory):
        # A call a gate blocked never ran: the system working, not the agent breaking policy, unless asked.
        if call.blocked and not rules.blocked_is_violation:
            continue
        counts[call.name] += 1
        broken = _call_violations(call, succeeded, counts, rules)
        if call.blocked and not broken:
            broken = [Violation(call.step, "blocked", f"{call.name} was blocked by a gate")]
        found.extend(broken)
        if not call.errored and not call.blocked:
            succeeded.add(call.name)
    if rules.forbidden_output and has_content(record, "output"):
        output = content_text(record.output)
        found.extend(
            Violation(None, "forbidden_output", f"final output matches {pattern.pattern!r}")
            for pattern in rules.forbidden_output
            if pattern.search(output)
        )
    return found


@evaluator(
    NAME,
    version="1.0.0",
    pack="agent",
    requires=["trajectory"],
    check=compile_rules,
    outputs=[
        Output("passed", "boolean", description="No policy rule was broken."),
        Output(
            "violations",
            "number",
            min=0.0,
            higher_is_better=False,
            description="Broken rules: one per offending call and rule, and one per matching output pattern.",
        ),
    ],
    params={
        "forbidden_tools": "Tool names the agent must not call; * and ? globs (e.g. 'delete_*').",
        "requires_before": "Tool -> the tool (or list of tools) that must have been called successfully earlier, "
        "e.g. {issue_refund: lookup_order}.",
        "max_calls": "Tool -> the most calls allowed; each call beyond it is a violation.",
        "forbidden_arguments": "Regular expressions searched in each tool call's arguments (as canonical JSON), "
        "e.g. a card number.",
        "forbidden_output": "Regular expressions searched in the record's final output.",
        "blocked_is_violation": "Count calls a gate blocked: checked against the rules, and a violation ('blocked') "
        "even when they break none. By default a blocked call is the system working and is ignored.",
    },
)
def policy_violations(
    record: Record,
    *,
    forbidden_tools: list[str] | None = None,
    requires_before: dict[str, Any] | None = None,
    max_calls: dict[str, int] | None = None,
    forbidden_arguments: list[str] | None = None,
    forbidden_output: list[str] | None = None,
    blocked_is_violation: bool = False,
) -> dict[str, Score]:
    """Whether the agent broke a policy rule (a forbidden tool, a call before its prerequisite, too many calls,
    forbidden arguments or output), with the number of violations and each one's step and rule."""
    rules = compile_rules(
        forbidden_tools=forbidden_tools,
        requires_before=requires_before,
        max_calls=max_calls,
        forbidden_arguments=forbidden_arguments,
        forbidden_output=forbidden_output,
        blocked_is_violation=blocked_is_violation,
    )
    found = find_violations(record, rules)
    shown = "; ".join(str(v) for v in found[:_EXPLANATION_LIMIT])
    more = len(found) - _EXPLANATION_LIMIT
    explanation = shown + (f"; and {more} more" if more > 0 else "")
    passed = Score(passed=not found, explanation=explanation)
    if found:
        passed.metadata["violations"].CopyFrom(
            to_value([{"step": v.step, "rule": v.rule, "detail": v.detail} for v in found])
        )
    return {"passed": passed, "violations": Score(number=float(len(found)), explanation=explanation)}


EVALUATORS = (policy_violations,)
