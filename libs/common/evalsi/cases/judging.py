"""Rubric grading by a judge panel (docs/cases.md, "Who grades").

A panel is one judge per model. Each judge reads (conversation, last reply, rubric) ``quorum`` times and
answers ``{"reasoning": ..., "score": 0..1}``; a judge's score is the median of its samples. The panel's
score is the ``aggregate`` (median, mean or min) of its judges' scores, and the rubric passes only when that
score is at least ``min_score`` AND at least ``min_agreement`` of the judges pass on their own. Every judge's
score and reason stay in the check's detail, so a split panel is visible instead of hidden in an average.

An unparseable answer scores 0 with the reason (a broken grader never looks like a pass). A judge that
cannot answer after its retries makes the check an ``error``: the measurement was not taken, which is
neither a pass nor the agent's failure.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evalsi.cases.graders import Check
from evalsi.cases.model import Case, Policy
from evalsi.cases.transcript import Transcript
from evalsi.errors import BadInputError, InfraError
from evalsi.judges import JudgeClient, JudgeConfig
from evalsi.packs.judge.answers import parse_answer

AGGREGATES: tuple[str, ...] = ("median", "mean", "min")
PANEL_KEYS: tuple[str, ...] = ("judges", "aggregate", "min_agreement", "quorum", "tolerance")
PANEL_FILE = "evals.yaml"  # at the root of a --source directory: the cases' own panel configuration
DEFAULT_TOLERANCE = 0.1

RUBRIC_TEMPLATE_VERSION = "cases-rubric@1"
RUBRIC_SYSTEM = (
    "You grade one reply of a customer-service agent against a rubric. Read the conversation, then the agent's "
    "last reply, then the rubric. Score how well the last reply meets the rubric, from 0 (not at all) to 1 "
    "(fully). Answer with one JSON object and nothing else: "
    '{"reasoning": "<one sentence>", "score": <a number from 0 to 1>}'
)
_POLICY_RULES = {
    "ask_once": "ask at most {max} question(s) per reply",
    "investigate_first": "ask on a vague request, don't search immediately",
    "act_fast": "act on the first plausible reading: call a tool on the first turn rather than asking",
}


@dataclass(frozen=True)
class PanelConfig:
    """``judges`` (one per model, by name), ``aggregate``, ``min_agreement``, ``quorum``, ``tolerance``."""

    judges: dict[str, JudgeConfig] = field(default_factory=dict)
    aggregate: str = "median"
    min_agreement: float = 0.5
    quorum: int = 1
    tolerance: float = DEFAULT_TOLERANCE

    @classmethod
    def from_mapping(cls, doc: Any, where: str) -> PanelConfig:
        if not isinstance(doc, Mapping):
            raise BadInputError(f"{where}: expected a mapping with {', '.join(PANEL_KEYS)}")
        for key in doc:
            if key not in PANEL_KEYS:
                raise BadInputError(f"{where}: {key}: unknown key; expected one of {', '.join(PANEL_KEYS)}")
        raw = doc.get("judges") or []
        if not isinstance(raw, list):
            raise BadInputError(f"{where}: judges: expected a list, one entry per model")
        judges: dict[str, JudgeConfig] = {}
        for index, entry in enumerate(raw):
            spec = {"model": entry} if isinstance(entry, str) else entry
            if not isinstance(spec, Mapping):
                raise BadInputError(f"{where}: judges[{index}]: expected a model name or a mapping with model")
            name = spec.get("name") or spec.get("model")
            config = JudgeConfig.from_mapping({**spec, "name": str(name)}, where=f"{where}: judges[{index}]")
            if config.name in judges:
                raise BadInputError(f"{where}: judges[{index}]: judge {config.name!r} is listed twice; one per model")
            judges[config.name] = config
        aggregate = doc.get("aggregate", "median")
        if aggregate not in AGGREGATES:
            raise BadInputError(f"{where}: aggregate: {aggregate!r}; expected one of {', '.join(AGGREGATES)}")
        min_agreement = _fraction(doc.get("min_agreement", 0.5), f"{where}: min_agreement")
        quorum = doc.get("quorum", 1)
        if not isinstance(quorum, int) or isinstance(quorum, bool) or quorum < 1:
            raise BadInputError(f"{where}: quorum: expected an integer >= 1 (samples per judge), got {quorum!r}")
        tolerance = _fraction(doc.get("tolerance", DEFAULT_TOLERANCE), f"{where}: tolerance")
        return cls(judges, aggregate, min_agreement, quorum, tolerance)

    def with_judge(self, judge: JudgeConfig) -> PanelConfig:
        """``--judge-model``: one judge replaces the panel's, for a one-off run; the rest is kept."""
        return PanelConfig({judge.name: judge}, self.aggregate, self.min_agreement, self.quorum, self.tolerance)

    def to_dict(self) -> dict[str, Any]:
        return {"judges": [{"name": n, "provider": c.provider, "model": c.model} for n, c in self.judges.items()],
                "aggregate": self.aggregate, "min_agreement": self.min_agreement, "quorum": self.quorum,
                "tolerance": self.tolerance}


def _fraction(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise BadInputError(f"{where}: expected a number from 0 to 1, got {value!r}")
    return float(value)


def load_panel(path: str | Path) -> PanelConfig:
    file = Path(path)
    try:
        doc = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInputError(f"--judges {path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise BadInputError(f"{path}: not valid YAML: {exc}") from None
    return PanelConfig.from_mapping(doc or {}, str(path))


def panel_for_source(source: str | Path) -> PanelConfig | None:
    """The panel of ``<source>/evals.yaml`` when ``source`` is a directory holding one, else None."""
    file = Path(source) / PANEL_FILE
    return load_panel(file) if Path(source).is_dir() and file.is_file() else None


# --- asking -------------------------------------------------------------------------------------------------


def policy_rule(policy: Policy) -> str:
    return _POLICY_RULES[policy.name].format(max=policy.max)


def rubric_messages(case: Case, transcript: Transcript) -> list[dict[str, str]]:
    lines = []
    for turn in transcript.turns[:-1]:
        lines += [f"customer: {turn.user}", f"agent: {turn.reply}"]
    last = transcript.last
    lines.append(f"customer: {last.user}")
    parts = ["## Conversation", "\n".join(lines) or "(none)", "## The agent's last reply", last.reply or "(empty)",
             "## Rubric", (case.expect.rubric or "").strip()]
    if case.expect.policy is not None:
        parts += ["## The store's rule for asking", f"The agent should {policy_rule(case.expect.policy)}."]
    return [{"role": "system", "content": RUBRIC_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def _aggregate(scores: list[float], how: str) -> float:
    if how == "mean":
        return statistics.fmean(scores)
    if how == "min":
        return min(scores)
    return statistics.median(scores)


@dataclass
class Panel:
    """A configured panel with a live client per judge (from a ``JudgeSet``)."""

    config: PanelConfig
    clients: Mapping[str, JudgeClient]

    async def _sample(self, client: JudgeClient, messages: list[dict[str, str]], index: int) -> tuple[float, str]:
        # Each sample its own cache entry: a quorum of cached copies of one answer would measure nothing.
        template_hash = hashlib.sha256(f"{RUBRIC_TEMPLATE_VERSION}#{index}".encode()).hexdigest()[:16]
        completion = await client.complete(messages, template_hash=template_hash)
        answer = parse_answer(completion.text, "0-1")
        if not answer.ok:
            return 0.0, f"{answer.explanation} ({answer.error})"
        return float(answer.value), answer.explanation  # type: ignore[arg-type]

    async def grade(self, case: Case, transcript: Transcript) -> Check:
        """The ``rubric`` check: pass, fail, or error when a judge could not answer."""
        min_score = case.expect.min_score
        messages = rubric_messages(case, transcript)
        judges: list[dict[str, Any]] = []
        for name, client in self.clients.items():
            samples: list[float] = []
            reasons: list[str] = []
            try:
                for index in range(self.config.quorum):
                    score, reason = await self._sample(client, messages, index)
                    samples.append(score)
                    reasons.append(reason)
            except InfraError as exc:
                judges.append({"judge": name, "model": client.config.model, "error": str(exc), "samples": samples})
                detail = {"judges": judges, "min_score": min_score}
                return Check("rubric", "error", f"judge {name} could not answer: {exc}", detail=detail)
            score = statistics.median(samples)
            judges.append({"judge": name, "model": client.config.model, "score": round(score, 4),
                           "samples": samples, "passed": score >= min_score, "reason": reasons[0]})
        scores = [j["score"] for j in judges]
        overall = round(_aggregate(scores, self.config.aggregate), 4)
        agreeing = sum(1 for j in judges if j["passed"]) / len(judges)
        detail = {"score": overall, "aggregate": self.config.aggregate, "min_score": min_score,
                  "agreement": round(agreeing, 4), "min_agreement": self.config.min_agreement, "judges": judges}
        each = ", ".join(f"{j['judge']} {j['score']:.2f}" for j in judges)
        if overall < min_score:
            return Check("rubric", "fail", f"score {overall:.2f} < min_score {min_score} ({each})", detail=detail)
        if agreeing < self.config.min_agreement:
            return Check("rubric", "fail", f"score {overall:.2f} but only {agreeing:.0%} of judges pass; "
                         f"min_agreement {self.config.min_agreement:.0%} ({each})", detail=detail)
        return Check("rubric", "pass", f"score {overall:.2f} >= {min_score} ({each})", detail=detail)
