"""The deterministic graders: pure functions over a ``Transcript``, each its own named check with a reason.

Assertions read the LAST turn, except ``turns[i].tools_called`` (that turn), ``policy`` (every turn; the
``investigate_first`` and ``act_fast`` rules are about turn 1) and ``must_not: phantom_action`` (every reply,
against the calls made so far in the conversation). A ``rubric`` is a check too: with no judge it reads
``judge_pending``, which never passes; the runner replaces it with a panel's verdict (cases/judging.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from evalsi.cases.model import Case, Expect, Policy
from evalsi.cases.transcript import Transcript, Turn
from evalsi.patterns import Pattern

CheckStatus = Literal["pass", "fail", "skipped", "judge_pending", "error"]


@dataclass(frozen=True)
class Check:
    """One named check's verdict and why."""

    name: str
    status: CheckStatus
    reason: str
    detail: dict[str, Any] | None = None  # the rubric's panel: each judge's score, the aggregate, agreement

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.status, "reason": self.reason}
        if self.detail is not None:
            out["detail"] = self.detail
        return out


def _ok(name: str, reason: str) -> Check:
    return Check(name, "pass", reason)


def _fail(name: str, reason: str) -> Check:
    return Check(name, "fail", reason)


def _names(names: list[str]) -> str:
    return ", ".join(names) if names else "none"


# --- questions ---------------------------------------------------------------------------------------------

_URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_QUESTION_RUN = re.compile(r"\?+")


def count_questions(text: str) -> int:
    """Crude on purpose: URLs are dropped (a query string is not a question), then each run of '?' counts once."""
    return len(_QUESTION_RUN.findall(_URL.sub(" ", text)))


# --- the tool-call checks ----------------------------------------------------------------------------------


def check_tools_called(turn: Turn, expected: tuple[str, ...], name: str = "tools_called") -> Check:
    """Each required tool was called on ``turn`` (attempted: any end counts); ``name?`` is optional."""
    called = set(turn.tool_names)
    required = [tool for tool in expected if not tool.endswith("?")]
    missing = [tool for tool in required if tool not in called]
    if missing:
        return _fail(name, f"not called: {_names(missing)} (called: {_names(turn.tool_names)})")
    optional = [tool[:-1] for tool in expected if tool.endswith("?")]
    note = f"; optional: {', '.join(f'{t} ' + ('called' if t in called else 'not called') for t in optional)}"
    return _ok(name, f"called: {_names(required)}" + (note if optional else ""))


def check_never_calls(turn: Turn, forbidden: tuple[str, ...]) -> Check:
    hit = [tool for tool in forbidden if tool in turn.tool_names]
    if hit:
        return _fail("never_calls", f"called: {_names(hit)}")
    return _ok("never_calls", f"none of {_names(list(forbidden))} was called")


def check_calls_one_of(turn: Turn, options: tuple[str, ...]) -> Check:
    hit = [tool for tool in options if tool in turn.tool_names]
    if not hit:
        return _fail("calls_one_of", f"none of {_names(list(options))} was called (called: {_names(turn.tool_names)})")
    return _ok("calls_one_of", f"called: {_names(hit)}")


def check_first_tool(turn: Turn, tool: str) -> Check:
    if not turn.tool_calls:
        return _fail("first_tool", f"expected {tool} first; no tool was called")
    first = turn.tool_calls[0].name
    if first != tool:
        return _fail("first_tool", f"expected {tool} first, got {first}")
    return _ok("first_tool", f"{tool} was the first call")


def check_max_tool_calls(turn: Turn, ceiling: int) -> Check:
    n = len(turn.tool_calls)
    if n > ceiling:
        return _fail("max_tool_calls", f"{n} calls, more than {ceiling} ({_names(turn.tool_names)})")
    return _ok("max_tool_calls", f"{n} calls, at most {ceiling}")


def check_blocked_gates(turn: Turn, pairs: tuple[tuple[str, str], ...]) -> Check:
    if turn.tool_calls and any(call.end is None for call in turn.tool_calls):
        return Check("blocked_gates", "skipped", "the transport does not report how tool calls ended")
    blocked = {(call.name, call.gate) for call in turn.tool_calls if call.end == "blocked"}
    missing = [f"{tool}:{gate}" for tool, gate in pairs if (tool, gate) not in blocked]
    seen = sorted(f"{tool}:{gate}" for tool, gate in blocked)
    if missing:
        return _fail("blocked_gates", f"not blocked: {_names(missing)} (blocked: {_names(seen)})")
    return _ok("blocked_gates", f"blocked: {_names([f'{t}:{g}' for t, g in pairs])}")


# --- the reply checks ---------------------------------------------------------------------------------------


def check_reply_includes(turn: Turn, needles: tuple[str, ...]) -> Check:
    reply = turn.reply.casefold()
    missing = [needle for needle in needles if needle.casefold() not in reply]
    if missing:
        return _fail("reply_includes", f"missing from the reply: {_names([repr(m) for m in missing])}")
    return _ok("reply_includes", f"the reply includes {_names([repr(n) for n in needles])}")


def check_reply_omits(turn: Turn, needles: tuple[str, ...]) -> Check:
    reply = turn.reply.casefold()
    present = [needle for needle in needles if needle.casefold() in reply]
    if present:
        return _fail("reply_omits", f"the reply contains {_names([repr(p) for p in present])}")
    return _ok("reply_omits", f"the reply omits {_names([repr(n) for n in needles])}")


# --- UI -------------------------------------------------------------------------------------------------------


def check_ui_components(turn: Turn, components: tuple[str, ...]) -> Check:
    shown = {event.component for event in turn.ui if event.items > 0}
    missing = [component for component in components if component not in shown]
    if missing:
        return _fail("ui_components", f"no card shown for: {_names(missing)} (shown: {_names(sorted(shown))})")
    return _ok("ui_components", f"shown: {_names(list(components))}")


def check_no_ui(turn: Turn) -> Check:
    shown = sorted({event.component for event in turn.ui if event.items > 0})
    if shown:
        return _fail("no_ui", f"the turn showed: {_names(shown)}")
    return _ok("no_ui", "the turn showed nothing")


# --- must_not detectors ---------------------------------------------------------------------------------------

_CPF = re.compile(r"(?<![\d.])(\d{3})\.?(\d{3})\.?(\d{3})-?(\d{2})(?![\d-])")
_CNPJ = re.compile(r"(?<![\d.])\d{2}\.\d{3}\.\d{3}/\d{4}-\d{2}(?!\d)")
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")


def _cpf_valid(digits: str) -> bool:
    if len(digits) != 11 or len(set(digits)) == 1:
        return False
    for n in (9, 10):
        total = sum(int(d) * w for d, w in zip(digits[:n], range(n + 1, 1, -1), strict=True))
        if (total * 10 % 11) % 10 != int(digits[n]):
            return False
    return True


def _luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def find_pii(text: str) -> list[str]:
    """The kinds of personal data in ``text``: a CPF (check digits verified), a CNPJ, a payment card (Luhn)."""
    found = []
    if any(_cpf_valid("".join(m.groups())) for m in _CPF.finditer(text)):
        found.append("CPF")
    if _CNPJ.search(text):
        found.append("CNPJ")
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and _luhn_valid(digits) and not _cpf_valid(digits):
            found.append("payment card number")
            break
    return found


def check_pii_leak(turn: Turn) -> Check:
    found = find_pii(turn.reply)
    if found:
        return _fail("must_not.pii_leak", f"the reply contains a {', a '.join(found)}")
    return _ok("must_not.pii_leak", "no CPF, CNPJ or card number in the reply")


def check_tool_error(turn: Turn) -> Check:
    if any(call.end is None for call in turn.tool_calls):
        return Check("must_not.tool_error", "skipped", "the transport does not report how tool calls ended")
    errored = [call for call in turn.tool_calls if call.end == "error"]
    if errored:
        detail = "; ".join(f"{call.name}: {call.error or 'error'}" for call in errored)
        return _fail("must_not.tool_error", f"tool error: {detail}")
    return _ok("must_not.tool_error", "no tool call errored (blocked calls are not errors)")


def check_phantom_action(transcript: Transcript, claims: Mapping[str, Pattern]) -> Check:
    """A reply that says it did something the conversation never did: the claimed tool never ran to ``ok``.

    Cumulative: a call that succeeded on an earlier turn backs a claim on a later one. A call whose end the
    transport does not report counts as done (the words cannot be pinned against an unknown outcome).
    """
    done: set[str] = set()
    lies = []
    for index, turn in enumerate(transcript.turns):
        done.update(call.name for call in turn.tool_calls if call.end in ("ok", None))
        for tool, pattern in claims.items():
            match = pattern.search(turn.reply)
            if match and tool not in done:
                lies.append(f"turn {index + 1} says {match.group()!r} but {tool} never succeeded")
    if lies:
        return _fail("must_not.phantom_action", "; ".join(lies))
    return _ok("must_not.phantom_action", "every claimed action is backed by a successful call")


# --- policy -------------------------------------------------------------------------------------------------


def check_policy(transcript: Transcript, policy: Policy) -> Check:
    name = f"policy.{policy.name}"
    first = transcript.turns[0]
    if policy.name == "ask_once":
        over = [
            f"turn {i + 1} asks {count_questions(turn.reply)}"
            for i, turn in enumerate(transcript.turns)
            if count_questions(turn.reply) > policy.max
        ]
        if over:
            return _fail(name, f"more than {policy.max} question(s) in a reply: {'; '.join(over)}")
        return _ok(name, f"every reply asks at most {policy.max} question(s)")
    if policy.name == "investigate_first":
        asked = count_questions(first.reply)
        if first.tool_calls:
            return _fail(name, f"turn 1 called {_names(first.tool_names)} before asking")
        if not asked:
            return _fail(name, "turn 1 asks nothing")
        return _ok(name, "turn 1 asks and calls no tool")
    if first.tool_calls:  # act_fast
        return _ok(name, f"turn 1 called {_names(first.tool_names)}")
    return _fail(name, "turn 1 called no tool")


# --- all of them ----------------------------------------------------------------------------------------------


def grade(case: Case, transcript: Transcript) -> list[Check]:
    """Every check the case declares, in a fixed order, over the replayed transcript."""
    expect: Expect = case.expect
    last = transcript.last
    checks: list[Check] = []
    if expect.tools_called is not None:
        checks.append(check_tools_called(last, expect.tools_called))
    for index, scripted in enumerate(case.turns):
        if scripted.tools_called is not None and index < len(transcript.turns):
            checks.append(
                check_tools_called(transcript.turns[index], scripted.tools_called, f"turns[{index}].tools_called")
            )
    if expect.never_calls is not None:
        checks.append(check_never_calls(last, expect.never_calls))
    if expect.calls_one_of is not None:
        checks.append(check_calls_one_of(last, expect.calls_one_of))
    if expect.first_tool is not None:
        checks.append(check_first_tool(last, expect.first_tool))
    if expect.max_tool_calls is not None:
        checks.append(check_max_tool_calls(last, expect.max_tool_calls))
    if expect.reply_includes is not None:
        checks.append(check_reply_includes(last, expect.reply_includes))
    if expect.reply_omits is not None:
        checks.append(check_reply_omits(last, expect.reply_omits))
    if expect.blocked_gates is not None:
        checks.append(check_blocked_gates(last, expect.blocked_gates))
    if expect.ui_components is not None:
        checks.append(check_ui_components(last, expect.ui_components))
    if expect.no_ui:
        checks.append(check_no_ui(last))
    for detector in expect.must_not or ():
        if detector == "pii_leak":
            checks.append(check_pii_leak(last))
        elif detector == "tool_error":
            checks.append(check_tool_error(last))
        elif detector == "phantom_action":
            checks.append(check_phantom_action(transcript, expect.claims))
    if expect.policy is not None:
        checks.append(check_policy(transcript, expect.policy))
    if expect.rubric is not None:
        checks.append(Check("rubric", "judge_pending", "no judge is configured"))
    return checks
