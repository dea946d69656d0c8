"""Simulated users: a persona model plays the customer of a ``persona`` case against the agent (docs/cases.md).

The persona's whole instruction is its ``goal``, ``style`` and ``knows`` facts, and the rule that it may assert
those facts and nothing else: asked anything it does not have, it answers with ignorance, as a real customer
without that fact would. It talks to the agent through the same transport a replay uses, turn by turn, until
``max_turns`` customer messages were sent or it emits a stop marker (``<<goal_met>>``, ``<<gave_up>>``); the
reason and the turn are recorded. The transcript is graded exactly as a replayed one, and marked
``simulated: true`` in the result, the transcript and the report.

A refused seed is an ``error`` here (the Runner skips it): a simulation cannot start from a state it was
denied. A persona model that cannot answer is an ``error`` too: the conversation was never finished.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evalsi.cases.model import BrokenCase, Case
from evalsi.cases.result import CaseResult
from evalsi.cases.runner import CaseRunner, Report, unmet_requirements
from evalsi.cases.transport import AgentDescription, SeedRefused, Transport, TransportError
from evalsi.errors import BadInputError, InfraError
from evalsi.judges import JudgeClient

# tau2's user simulator's tokens too, for tau2 tasks simulated through this loop (evalsi.datasets.tau2_sim)
STOP_MARKERS: dict[str, str] = {"<<goal_met>>": "goal_met", "<<gave_up>>": "gave_up", "###STOP###": "goal_met",
                                "###TRANSFER###": "transferred", "###OUT-OF-SCOPE###": "out_of_scope"}
DEFAULT_MAX_TURNS = 8
PERSONA_TEMPLATE_VERSION = "cases-persona@1"
KICKOFF = "(The agent's chat window is open. Write your first message to the agent.)"


def simulated_conversation_id(case_id: str) -> str:
    """``sim-<case>-<8 hex>``: two runs on one conversation would share the deployment's session."""
    return f"sim-{case_id}-{secrets.token_hex(4)}"


def persona_system_prompt(persona: Mapping[str, Any]) -> str:
    """The persona's whole instruction: goal, style, the facts it knows, the anti-invention rule, the markers; or,
    for a persona an importer built (tau2's user simulator), the ``system`` prompt it rendered."""
    if persona.get("system"):
        return str(persona["system"])
    knows = persona.get("knows") or {}
    facts = "\n".join(f"- {key}: {value}" for key, value in knows.items()) or "- (none: you know no specifics)"
    parts = [
        "You are role-playing a CUSTOMER writing to a company's customer-service agent in a chat. You are not an "
        "assistant; never help the agent, never explain that you are a simulation.",
        f"Your goal: {persona['goal']}",
    ]
    if persona.get("style"):
        parts.append(f"How you write: {persona['style']}")
    parts += [
        "The ONLY facts you know (you may state exactly these, and nothing else):\n" + facts,
        "Rule: never invent a fact. If the agent asks for anything that is not in the list above (an order "
        "number, an email, a name, a date, a preference you were not given), answer with ignorance the way a "
        "real customer without it would (\"não sei\", \"não tenho isso aqui\", \"I don't know\", \"I don't have "
        "that\"). Do not make up numbers, codes, names or details.",
        "Write one short customer message per reply, in the language the conversation uses, with no quotes "
        "and no narration.",
        "When your goal has been served, reply with <<goal_met>> (and nothing else needed). If you give up "
        "(the agent cannot help, or keeps you going in circles), reply with <<gave_up>>.",
    ]
    return "\n\n".join(parts)


def persona_messages(persona: Mapping[str, Any], said: Sequence[str], replies: Sequence[str]) -> list[dict[str, str]]:
    """The persona model's view: it is the assistant (the customer); the agent's replies are its user turns."""
    # an importer's persona may open with the agent's greeting, as tau2's orchestrator does
    kickoff = str(persona.get("kickoff") or KICKOFF)
    messages = [{"role": "system", "content": persona_system_prompt(persona)}, {"role": "user", "content": kickoff}]
    for index, message in enumerate(said):
        messages.append({"role": "assistant", "content": message})
        if index < len(replies):
            messages.append({"role": "user", "content": replies[index] or "(the agent sent no text)"})
    return messages


def find_stop(text: str) -> tuple[str | None, str]:
    """The stop reason in a persona message (``goal_met`` or ``gave_up``, first marker wins) and the text
    without markers."""
    positions = [(text.find(marker), reason) for marker, reason in STOP_MARKERS.items() if marker in text]
    cleaned = text
    for marker in STOP_MARKERS:
        cleaned = cleaned.replace(marker, "")
    return (min(positions)[1] if positions else None), cleaned.strip()


class PersonaError(InfraError):
    """The persona model could not answer (or answered nothing): the conversation was never finished."""


class Simulator(CaseRunner):
    """Drives ``persona`` cases with a persona model; grades their transcripts as a replay's."""

    def __init__(self, transport: Transport, persona_client: JudgeClient, *,
                 conversation_id: Callable[[str], str] = simulated_conversation_id, **kwargs: Any) -> None:
        super().__init__(transport, conversation_id=conversation_id, **kwargs)
        self.persona_client = persona_client

    async def run(self, items: Sequence[Case | BrokenCase], *, agent: str | None = None) -> Report:
        replays = [item for item in items if isinstance(item, Case) and item.persona is None]
        personas = [item for item in items if not (isinstance(item, Case) and item.persona is None)]
        if replays:
            self.notices.append(f"{len(replays)} replay case(s) left out: `evalsi cases run` replays them")
        report = await super().run(personas, agent=agent)
        report.simulated = True
        return report

    async def _persona_says(self, persona: Mapping[str, Any], said: list[str], replies: list[str],
                            turn: int) -> str:
        # Each position of each conversation its own cache key: a cached persona would replay one conversation.
        template = f"{PERSONA_TEMPLATE_VERSION}#{turn}#{secrets.token_hex(4)}"
        try:
            completion = await self.persona_client.complete(persona_messages(persona, said, replies),
                                                            template_hash=template)
        except InfraError as exc:
            raise PersonaError(f"the persona model could not answer at turn {turn}: {exc}") from None
        return completion.text or ""

    async def run_one(self, item: Case | BrokenCase) -> CaseResult:
        if isinstance(item, BrokenCase) or item.persona is None:
            return await super().run_one(item)
        case = item
        persona = case.persona or {}
        result = CaseResult(case.id, case.agent, case.where, "skipped", tenant=case.tenant, simulated=True)
        description = await self._description(case.agent, case.tenant)
        if description is not None and case.requires:
            unmet = unmet_requirements(case, description)
            if unmet:
                result.reason = unmet
                return result
        result.conversation = self.conversation_id(case.id)
        max_turns = int(persona.get("max_turns", DEFAULT_MAX_TURNS))
        said: list[str] = []
        replies: list[str] = []
        try:
            if case.state:
                try:
                    await self.transport.seed(result.conversation, case.agent, case.tenant, case.state)
                except SeedRefused as exc:  # the Runner skips; a simulation cannot start without its state
                    result.status, result.reason = "error", f"seed refused: {exc} (a simulation needs its state)"
                    return result
            message = persona.get("opens_with")
            while True:
                turn_no = len(said) + 1
                if message is None:
                    reason, message = find_stop(await self._persona_says(persona, said, replies, turn_no))
                    if reason is not None:
                        result.stop = {"reason": reason, "turn": turn_no - 1, "said": message}
                        break
                    if not message:
                        raise PersonaError(f"the persona model answered nothing at turn {turn_no}")
                if turn_no > max_turns:
                    result.stop = {"reason": "max_turns", "turn": max_turns, "said": None}
                    break
                said.append(message)
                turn = await self.transport.turn(result.conversation, case.agent, case.tenant, message)
                result.turns.append(turn)
                replies.append(turn.reply)
                message = None
        except TransportError as exc:
            result.status, result.reason = "error", f"transport: {exc}"
            return result
        except PersonaError as exc:
            result.status, result.reason = "error", str(exc)
            return result
        if not result.turns:
            result.status, result.reason = "error", f"the persona stopped ({result.stop and result.stop['reason']}) " \
                "before its first message: nothing to grade"
            return result
        return await self.finish(case, result)


def check_eval_profile(profile: str, eval_tools: Sequence[str],
                       descriptions: Mapping[str, AgentDescription | None]) -> None:
    """``--eval-profile`` is a verified declaration: refuse unless ``--eval-tools`` names every side-effect tool
    of every target agent. An agent whose description cannot be read cannot be verified: refused too."""
    covered = set(eval_tools)
    for agent, description in descriptions.items():
        if description is None:
            raise BadInputError(
                f"--eval-profile {profile}: cannot read agent {agent}'s description (GET /v1/agents/{agent}), so "
                "its side-effect tools cannot be verified; run against a staging deployment with --staging")
        missing = sorted(description.side_effect_tools - covered)
        if missing:
            raise BadInputError(
                f"--eval-profile {profile}: agent {agent}'s side-effect tool(s) {', '.join(missing)} are not "
                f"covered; name every one in --eval-tools (the profile must swap them for dry-runs), or use "
                "--staging against a staging deployment")
