"""The harness configuration: which model, which tools, which budgets, which mocks and faults.

One YAML file (docs/harness.md). ``load_config`` is the single place that turns it into ``HarnessConfig``,
so every mistake is a ``BadInputError`` naming the file and the field path (``harness.yaml: budget.usd``)
and what would be accepted. The keys the RunSpec's ``BuiltinHarness`` shares (``max_steps``, ``budget``,
``tools``) keep its names; its camelCase JSON spellings (``maxSteps``, ``wallClock``) are accepted too.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from evalsi.durations import parse_duration
from evalsi.errors import BadInputError
from evalsi.judges import JudgeConfig

FaultKind = Literal["timeout", "error", "malformed"]
FAULT_KINDS: tuple[str, ...] = ("timeout", "error", "malformed")

DEFAULT_MAX_STEPS = 20
DEFAULT_TOOL_TIMEOUT_S = 60.0

# The RunSpec's protobuf JSON spellings, so a harness block copied from an EvalRun reads the same.
_ALIASES = {"maxSteps": "max_steps", "wallClock": "wall_clock", "toolTimeout": "tool_timeout",
            "inputPerMtok": "input_per_mtok", "outputPerMtok": "output_per_mtok"}


@dataclass(frozen=True)
class Budget:
    """Limits a trial stops at (``None``: unlimited). Exhausting one is a result, never a crash."""

    tokens: int | None = None
    usd: float | None = None
    wall_clock_s: float | None = None


@dataclass(frozen=True)
class Pricing:
    """US dollars per million tokens; the harness turns usage into cost with it."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server: a URL (streamable HTTP) or a command (stdio), never both."""

    url: str = ""
    command: tuple[str, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.url or " ".join(self.command)


@dataclass(frozen=True)
class MockConfig:
    """A tool answered without being called: a fixed ``result``, a scripted list of ``results`` (the n-th call
    gets the n-th, the last repeats), or an ``error``. ``description``/``parameters`` declare a tool no
    server provides; a mock of a real tool keeps the real one's schema."""

    tool: str
    result: Any = None
    results: tuple[Any, ...] = ()
    error: str | None = None
    description: str = ""
    parameters: Mapping[str, Any] | None = None

    def answer(self, call_index: int) -> tuple[Any, str | None]:
        """(result, error) for the ``call_index``-th call (1-based) of this tool."""
        if self.error is not None:
            return None, self.error
        if self.results:
            return self.results[min(call_index, len(self.results)) - 1], None
        return self.result, None


@dataclass(frozen=True)
class FaultConfig:
    """Faults injected into one tool's calls: on the listed call numbers, and/or on each call with
    probability ``rate``, drawn from the seed, the task, the trial and the call number (so reruns agree)."""

    tool: str
    kind: FaultKind
    rate: float = 0.0
    calls: frozenset[int] = frozenset()


@dataclass(frozen=True)
class HarnessConfig:
    model: JudgeConfig
    system: str = ""
    max_steps: int = DEFAULT_MAX_STEPS
    budget: Budget = Budget()
    pricing: Pricing | None = None
    python_tools: tuple[str, ...] = ()
    mcp_servers: tuple[McpServerConfig, ...] = ()
    mocks: Mapping[str, MockConfig] = field(default_factory=dict)
    faults: tuple[FaultConfig, ...] = ()
    seed: int = 0
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    parallel_tool_calls: bool = True
    source: str = "harness config"


def load_config(path: str | Path) -> HarnessConfig:
    """Read and validate a harness YAML file; errors name the file and the field."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInputError(f"{source}: cannot read the harness config: {exc.strerror or exc}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadInputError(f"{source}: not valid YAML: {exc}") from None
    return config_from_mapping(doc, source=source)


_TOP_KEYS = ("model", "system", "max_steps", "budget", "pricing", "tools", "mocks", "faults", "seed",
             "tool_timeout", "parallel_tool_calls")


def config_from_mapping(doc: Any, *, source: str = "harness config") -> HarnessConfig:
    """Validate a parsed config document; ``source`` (the file name) prefixes every error."""
    top = _section(doc, source, "", _TOP_KEYS)
    if "model" not in top:
        raise BadInputError(f"{source}: model: required (provider, model, base_url, ...: docs/judges.md keys)")
    model = JudgeConfig.from_mapping(top["model"], where=f"{source}: model")
    budget = _budget(top.get("budget", {}), source)
    pricing = _pricing(top["pricing"], source) if top.get("pricing") is not None else None
    if budget.usd is not None and pricing is None:
        raise BadInputError(f"{source}: budget.usd needs pricing (input_per_mtok, output_per_mtok) to count dollars")
    python_tools, mcp_servers = _tools(top.get("tools", {}), source)
    mocks = _mocks(top.get("mocks", {}), source)
    faults = _faults(top.get("faults", []), source)
    return HarnessConfig(
        model=model,
        system=_string(top.get("system", ""), source, "system"),
        max_steps=_int(top.get("max_steps", DEFAULT_MAX_STEPS), source, "max_steps", minimum=1),
        budget=budget,
        pricing=pricing,
        python_tools=python_tools,
        mcp_servers=mcp_servers,
        mocks=mocks,
        faults=faults,
        seed=_int(top.get("seed", 0), source, "seed", minimum=0),
        tool_timeout_s=_seconds(top.get("tool_timeout", DEFAULT_TOOL_TIMEOUT_S), source, "tool_timeout"),
        parallel_tool_calls=_bool(top.get("parallel_tool_calls", True), source, "parallel_tool_calls"),
        source=source,
    )


# --- sections ------------------------------------------------------------------------------------------------


def _budget(value: Any, source: str) -> Budget:
    section = _section(value, source, "budget", ("tokens", "usd", "wall_clock"))
    return Budget(
        tokens=_int(section["tokens"], source, "budget.tokens", minimum=1) if section.get("tokens") else None,
        usd=_number(section["usd"], source, "budget.usd", positive=True) if section.get("usd") else None,
        wall_clock_s=_seconds(section["wall_clock"], source, "budget.wall_clock") if section.get("wall_clock")
        else None,
    )


def _pricing(value: Any, source: str) -> Pricing:
    section = _section(value, source, "pricing", ("input_per_mtok", "output_per_mtok"))
    return Pricing(
        input_per_mtok=_number(section.get("input_per_mtok", 0.0), source, "pricing.input_per_mtok"),
        output_per_mtok=_number(section.get("output_per_mtok", 0.0), source, "pricing.output_per_mtok"),
    )


def _tools(value: Any, source: str) -> tuple[tuple[str, ...], tuple[McpServerConfig, ...]]:
    section = _section(value, source, "tools", ("python", "mcp"))
    python = _list(section.get("python", []), source, "tools.python")
    for i, spec in enumerate(python):
        module, sep, attr = spec.partition(":") if isinstance(spec, str) else ("", "", "")
        if not (module and sep and attr):
            raise BadInputError(f"{source}: tools.python[{i}]: expected \"package.module:function\", got {spec!r}")
    servers = []
    for i, item in enumerate(_list(section.get("mcp", []), source, "tools.mcp")):
        where = f"tools.mcp[{i}]"
        entry = _section(item, source, where, ("url", "command", "headers", "env"))
        url = _string(entry.get("url", ""), source, f"{where}.url")
        command = entry.get("command", [])
        if isinstance(command, str):
            command = command.split()
        if not isinstance(command, list) or not all(isinstance(part, str) for part in command):
            raise BadInputError(f"{source}: {where}.command: expected a list of strings, got {command!r}")
        if bool(url) == bool(command):
            raise BadInputError(f"{source}: {where}: give exactly one of url (streamable HTTP) and command (stdio)")
        if url and not url.startswith(("http://", "https://")):
            raise BadInputError(f"{source}: {where}.url: must start with http:// or https://, got {url!r}")
        servers.append(McpServerConfig(
            url=url, command=tuple(command),
            headers=_str_map(entry.get("headers", {}), source, f"{where}.headers"),
            env=_str_map(entry.get("env", {}), source, f"{where}.env"),
        ))
    return tuple(python), tuple(servers)


def _mocks(value: Any, source: str) -> dict[str, MockConfig]:
    if not isinstance(value, Mapping):
        raise BadInputError(f"{source}: mocks: expected a mapping of tool name to mock, got {_type(value)}")
    mocks = {}
    for name, item in value.items():
        where = f"mocks.{name}"
        entry = _section(item, source, where, ("result", "results", "error", "description", "parameters"))
        answers = [key for key in ("result", "results", "error") if key in entry]
        if len(answers) != 1:
            raise BadInputError(f"{source}: {where}: give exactly one of result, results (a list) and error")
        results = entry.get("results", [])
        if "results" in entry and (not isinstance(results, list) or not results):
            raise BadInputError(f"{source}: {where}.results: expected a non-empty list of results")
        parameters = entry.get("parameters")
        if parameters is not None and not isinstance(parameters, Mapping):
            raise BadInputError(f"{source}: {where}.parameters: expected a JSON schema object")
        mocks[str(name)] = MockConfig(
            tool=str(name), result=entry.get("result"), results=tuple(results),
            error=_string(entry["error"], source, f"{where}.error") if "error" in entry else None,
            description=_string(entry.get("description", ""), source, f"{where}.description"),
            parameters=parameters,
        )
    return mocks


def _faults(value: Any, source: str) -> tuple[FaultConfig, ...]:
    faults = []
    for i, item in enumerate(_list(value, source, "faults")):
        where = f"faults[{i}]"
        entry = _section(item, source, where, ("tool", "kind", "rate", "calls"))
        tool = _string(entry.get("tool", ""), source, f"{where}.tool")
        if not tool:
            raise BadInputError(f"{source}: {where}.tool: required (the tool whose calls fail)")
        kind = entry.get("kind")
        if kind not in FAULT_KINDS:
            raise BadInputError(f"{source}: {where}.kind: must be one of {', '.join(FAULT_KINDS)}, got {kind!r}")
        rate = _number(entry.get("rate", 0.0), source, f"{where}.rate")
        if not 0.0 <= rate <= 1.0:
            raise BadInputError(f"{source}: {where}.rate: must be between 0 and 1, got {rate:g}")
        calls = _list(entry.get("calls", []), source, f"{where}.calls")
        for n in calls:
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise BadInputError(f"{source}: {where}.calls: call numbers are integers from 1, got {n!r}")
        if not rate and not calls:
            raise BadInputError(f"{source}: {where}: give rate (0..1) or calls (call numbers), or both")
        faults.append(FaultConfig(tool=tool, kind=kind, rate=rate, calls=frozenset(calls)))
    return tuple(faults)


# --- scalars -------------------------------------------------------------------------------------------------


def _at(source: str, path: str) -> str:
    return f"{source}: {path}" if path else source


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _section(value: Any, source: str, path: str, known: Sequence[str]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise BadInputError(f"{_at(source, path)}: expected a mapping, got {_type(value)}")
    out = {}
    for key, item in value.items():
        name = _ALIASES.get(str(key), str(key))
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            prefix = f"{path}." if path else ""
            raise BadInputError(f"{source}: {prefix}{key}: unknown key{hint}; expected one of {', '.join(known)}")
        out[name] = item
    return out


def _list(value: Any, source: str, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise BadInputError(f"{source}: {path}: expected a list, got {_type(value)}")
    return value


def _string(value: Any, source: str, path: str) -> str:
    if not isinstance(value, str):
        raise BadInputError(f"{source}: {path}: expected a string, got {_type(value)} {value!r}")
    return value


def _str_map(value: Any, source: str, path: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise BadInputError(f"{source}: {path}: expected a mapping of strings, got {value!r}")
    return {str(k): v for k, v in value.items()}


def _bool(value: Any, source: str, path: str) -> bool:
    if not isinstance(value, bool):
        raise BadInputError(f"{source}: {path}: expected true or false, got {value!r}")
    return value


def _int(value: Any, source: str, path: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BadInputError(f"{source}: {path}: expected an integer >= {minimum}, got {value!r}")
    return value


def _number(value: Any, source: str, path: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise BadInputError(f"{source}: {path}: expected a number {bound}, got {value!r}")
    return float(value)


def _seconds(value: Any, source: str, path: str) -> float:

    try:
        seconds = float(parse_duration(value)[:-1])
    except ValueError as exc:
        raise BadInputError(f"{source}: {path}: {exc}") from None
    if seconds <= 0:
        raise BadInputError(f"{source}: {path}: must be longer than zero, got {value!r}")
    return seconds
