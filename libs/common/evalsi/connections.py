"""The connections a server offers, from evalsi.yaml: named model endpoints (``judges:``) and agents (``agents:``).

    judges:
      default:
        connector: openai-compatible          # openai | openai-compatible | anthropic
        base_url: http://127.0.0.1:8000/v1    # default: the provider's own API
        model: my-judge                       # the model used when a request names none
        models: [my-judge, other]             # what requests may choose (default: [model])
        api_key: {env: JUDGE_KEY}             # or {file: /run/secrets/judge-key}; absent: no key is sent
        projects: [team-a]                    # projects that may name it (absent: every project)
        params: {temperature: 0}
        timeout_s: 60
        max_retries: 4
        rpm: 600
        tpm: 200000
    harness_tools: [weather_tools:get_weather]   # python tools run specs may give the built-in harness
    cli_agents: {commands: [sh], min_isolation: namespaced, max_timeout_s: 600}   # evalsi.cli_agent_policy
    evaluators: {packs: [core, judge], allowed_packs: [core, judge, rag]}   # evalsi.pack_policy
    agents:
      shop:
        protocol: http                        # http (docs/agent-protocol.md) | a2a | openai-responses
        url: http://127.0.0.1:9000            # openai-responses: the base URL, e.g. http://host/v1
        agent: shop                           # http: the agent id; openai-responses: use model instead
        token: {env: SHOP_TOKEN}              # sent as a Bearer token; absent: none
        projects: [team-a]
        timeout_s: 120

Credentials are references only: the value is read by the process that calls the endpoint, when it calls, and
never travels on the bus, in a spec or to a caller. On a server, requests and specs name these connections
(``evalsi.connection_rules``); the same judge connections serve judge evaluators and model targets.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalsi.cli_agent_policy import CliAgentPolicy, load_cli_policy
from evalsi.errors import BadInputError
from evalsi.judges.config import ENV_VAR_NAME, PROVIDERS, JudgeConfig, SecretRef
from evalsi.pack_policy import PackPolicy, load_pack_policy
from evalsi.yaml_files import read_yaml_file

# `evalsi serve` writes the sections to a file in its state directory and names it here for the api and workers;
# a deployment may point it at its evalsi.yaml.
CONNECTIONS_ENV = "EVALSI_CONNECTIONS_FILE"
JUDGE_KEYS = ("connector", "base_url", "model", "models", "api_key", "projects", "params", "timeout_s",
              "max_retries", "rpm", "tpm")
AGENT_KEYS = ("protocol", "url", "agent", "model", "token", "projects", "timeout_s")
AGENT_PROTOCOLS = ("http", "a2a", "openai-responses")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


@dataclass(frozen=True)
class JudgeConnection:
    """A model endpoint the server offers to judges and model targets, with its credential reference."""

    name: str
    connector: str
    base_url: str
    model: str
    models: tuple[str, ...]
    api_key: SecretRef = field(default_factory=SecretRef)
    projects: tuple[str, ...] = ()  # empty: every project
    params: dict[str, Any] = field(default_factory=dict, hash=False)
    timeout_s: float = 60.0
    max_retries: int = 4
    rpm: int | None = None
    tpm: int | None = None

    def config(self, *, name: str, model: str, template: str | None = None,
               params: Mapping[str, Any] | None = None) -> JudgeConfig:
        """The call config for ``model`` over this connection; ``params`` (a spec's sampling params) go on top."""
        return JudgeConfig(model=model, name=name, provider=self.connector, base_url=self.base_url,
                           params={**self.params, **(params or {})}, timeout_s=self.timeout_s,
                           max_retries=self.max_retries, rpm=self.rpm, tpm=self.tpm, template=template,
                           secret=self.api_key)

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {"connector": self.connector, "base_url": self.base_url, "model": self.model,
                                    "models": list(self.models), "params": dict(self.params),
                                    "timeout_s": self.timeout_s, "max_retries": self.max_retries}
        if self.api_key != SecretRef():
            document["api_key"] = _secret_document(self.api_key)
        if self.projects:
            document["projects"] = list(self.projects)
        for key in ("rpm", "tpm"):
            if getattr(self, key) is not None:
                document[key] = getattr(self, key)
        return document


@dataclass(frozen=True)
class AgentConnection:
    """An agent endpoint the server offers to run specs, with the reference of the token it is sent."""

    name: str
    protocol: str
    url: str
    agent: str = ""
    model: str = ""
    token: SecretRef = field(default_factory=SecretRef)
    projects: tuple[str, ...] = ()
    timeout_s: float = 120.0

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {"protocol": self.protocol, "url": self.url, "timeout_s": self.timeout_s}
        for key in ("agent", "model"):
            if getattr(self, key):
                document[key] = getattr(self, key)
        if self.token != SecretRef():
            document["token"] = _secret_document(self.token)
        if self.projects:
            document["projects"] = list(self.projects)
        return document


@dataclass(frozen=True)
class Connections:
    """The ``judges:`` and ``agents:`` sections; empty on a server that offers none."""

    # Left out of the hash (dicts have none), so a Config holding them stays hashable as before.
    judges: Mapping[str, JudgeConnection] = field(default_factory=dict, hash=False)
    agents: Mapping[str, AgentConnection] = field(default_factory=dict, hash=False)
    # Python tools (module:function) a served run may give the built-in harness: a tool runs in the worker with
    # its environment, so a caller naming any importable function (os:getenv) could read or send it.
    harness_tools: tuple[str, ...] = ()
    # Whether served runs may bring a CLI agent (spec.target.agent.cli), which commands, under what isolation
    # (evalsi.cli_agent_policy); None: refused.
    cli_agents: CliAgentPolicy | None = None
    # Which evaluator packs each project may name and has enabled (the evaluators: section, evalsi.pack_policy).
    packs: PackPolicy = field(default_factory=PackPolicy)

    @classmethod
    def from_mapping(cls, judges: Any, agents: Any, harness_tools: Any = None, *,
                     where: str = "evalsi.yaml", cli_agents: Any = None, evaluators: Any = None) -> Connections:
        return cls(
            {name: _judge(name, value, f"{where}: judges.{name}") for name, value in _entries(judges, "judges", where)},
            {name: _agent(name, value, f"{where}: agents.{name}") for name, value in _entries(agents, "agents", where)},
            _tools(harness_tools, f"{where}: harness_tools"),
            load_cli_policy(cli_agents, where),
            load_pack_policy(evaluators, where),
        )

    @classmethod
    def load(cls, path: str | Path) -> Connections:
        """The connection sections of an evalsi.yaml-shaped file (JSON is YAML too); its other keys are Config's."""
        document = read_yaml_file(path)
        if not isinstance(document, Mapping):
            raise BadInputError(f"{path}: the config must be a mapping of keys")
        return cls.from_mapping(document.get("judges"), document.get("agents"), document.get("harness_tools"),
                                where=str(path), cli_agents=document.get("cli_agents"),
                                evaluators=document.get("evaluators"))

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Connections:
        """What a service offers: the file ``EVALSI_CONNECTIONS_FILE`` names, or nothing."""
        path = (os.environ if environ is None else environ).get(CONNECTIONS_ENV, "")
        return cls.load(path) if path else cls()

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {"judges": {n: c.to_document() for n, c in self.judges.items()},
                                    "agents": {n: c.to_document() for n, c in self.agents.items()}}
        if self.harness_tools:
            document["harness_tools"] = list(self.harness_tools)
        if self.cli_agents is not None:
            document["cli_agents"] = self.cli_agents.to_document()
        if packs := self.packs.to_document():
            document["evaluators"] = packs
        return document

    def write(self, path: Path) -> Path:
        """The sections as a file only this user can read (they hold references, still nobody else's business)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(self.to_document(), handle, indent=2)
        os.chmod(path, 0o600)  # an existing file keeps its old mode through O_CREAT
        return path

    def judge(self, name: str, project: str, where: str) -> JudgeConnection:
        """The judge connection ``name`` if ``project`` may use it; else ``BadInputError`` naming ``where``."""
        return _granted(self.judges, name, project, where, "judges")

    def agent(self, name: str, project: str, where: str) -> AgentConnection:
        """The agent connection ``name`` if ``project`` may use it; else ``BadInputError`` naming ``where``."""
        return _granted(self.agents, name, project, where, "agents")


def _granted(section: Mapping[str, Any], name: str, project: str, where: str, key: str) -> Any:
    connection = section.get(name)
    if connection is not None and (not connection.projects or project in connection.projects):
        return connection
    offered = sorted(n for n, c in section.items() if not c.projects or project in c.projects)
    accepted = ", ".join(offered) if offered else f"none (the server's evalsi.yaml {key}: offers none to it)"
    reason = (f"is not granted to project {project!r}" if connection is not None
              else f"is not one of the server's configured {key} (evalsi.yaml {key}:)")
    raise BadInputError(f"{where}: {name!r} {reason}; accepted for project {project!r}: {accepted}")


def _entries(section: Any, key: str, where: str) -> list[tuple[str, Any]]:
    if section is None:
        return []
    if not isinstance(section, Mapping):
        raise BadInputError(f"{where}: {key}: expected a mapping of names to {key[:-1]} connections")
    for name in section:
        if not isinstance(name, str) or not _NAME.match(name):
            raise BadInputError(f"{where}: {key}.{name}: a name is letters, digits, '.', '_' and '-' "
                                "(at most 63, starting with a letter or digit)")
    return list(section.items())


def _judge(name: str, value: Any, where: str) -> JudgeConnection:
    values = _mapping(value, where, JUDGE_KEYS)
    connector = values.get("connector", "openai-compatible")
    if connector not in PROVIDERS:
        raise BadInputError(f"{where}.connector: must be one of {', '.join(PROVIDERS)}, got {connector!r}")
    models = _strings(values.get("models"), f"{where}.models")
    model = values.get("model", models[0] if models else None)
    if not isinstance(model, str) or not model:
        raise BadInputError(f"{where}.model: required (the model used when a request names none)")
    if models and model not in models:
        raise BadInputError(f"{where}.model: {model!r} is not in models ({', '.join(models)})")
    mapping = {key: values[key] for key in ("base_url", "params", "timeout_s", "max_retries", "rpm", "tpm")
               if key in values}
    # JudgeConfig's checks name the key under this connection's path.
    config = JudgeConfig.from_mapping({"name": name, "model": model, "provider": connector, **mapping}, where=where)
    base_url = values.get("base_url") or config.base_url
    return JudgeConnection(
        name=name, connector=connector, base_url=base_url.rstrip("/"), model=model, models=models or (model,),
        api_key=_secret(values.get("api_key"), f"{where}.api_key"),
        projects=_strings(values.get("projects"), f"{where}.projects"),
        params=dict(values.get("params") or {}), timeout_s=config.timeout_s, max_retries=config.max_retries,
        rpm=config.rpm, tpm=config.tpm,
    )


def _agent(name: str, value: Any, where: str) -> AgentConnection:
    values = _mapping(value, where, AGENT_KEYS)
    protocol = values.get("protocol")
    if protocol not in AGENT_PROTOCOLS:
        raise BadInputError(f"{where}.protocol: required, one of {', '.join(AGENT_PROTOCOLS)}; got {protocol!r}")
    url = values.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise BadInputError(f"{where}.url: required, an http:// or https:// URL; got {url!r}")
    for key in ("agent", "model"):
        if not isinstance(values.get(key, ""), str):
            raise BadInputError(f"{where}.{key}: must be a string")
    if protocol == "http" and not values.get("agent"):
        raise BadInputError(f"{where}.agent: required for protocol http (the agent id sent with every turn)")
    if protocol == "openai-responses" and not values.get("model"):
        raise BadInputError(f"{where}.model: required for protocol openai-responses")
    timeout = values.get("timeout_s", 120.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 3600:
        raise BadInputError(f"{where}.timeout_s: must be a number of seconds in (0, 3600], got {timeout!r}")
    return AgentConnection(
        name=name, protocol=protocol, url=url.rstrip("/"), agent=values.get("agent", ""),
        model=values.get("model", ""), token=_secret(values.get("token"), f"{where}.token"),
        projects=_strings(values.get("projects"), f"{where}.projects"), timeout_s=float(timeout),
    )


def _mapping(value: Any, where: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise BadInputError(f"{where}: expected a mapping of {', '.join(keys)}")
    for key in value:
        if key not in keys:
            close = difflib.get_close_matches(str(key), keys, n=1)
            hint = f"did you mean {close[0]}?" if close else f"accepted: {', '.join(keys)}"
            raise BadInputError(f"{where}.{key}: unknown key; {hint}")
    return value


def _tools(value: Any, where: str) -> tuple[str, ...]:
    tools = _strings(value, where)
    for index, tool in enumerate(tools):
        module, sep, attr = tool.partition(":")
        if not (module and sep and attr):
            raise BadInputError(f"{where}[{index}]: expected \"package.module:function\", got {tool!r}")
    return tools


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise BadInputError(f"{where}: expected a non-empty list of names")
    return tuple(value)


def _secret(value: Any, where: str) -> SecretRef:
    """``{env: NAME}`` or ``{file: PATH}``: a reference, never the credential itself."""
    if value is None:
        return SecretRef()
    if not isinstance(value, Mapping) or len(value) != 1 or next(iter(value)) not in ("env", "file"):
        raise BadInputError(f"{where}: expected {{env: VARIABLE}} or {{file: PATH}} (a reference; the credential "
                            "itself never goes in evalsi.yaml)")
    kind, ref = next(iter(value.items()))
    if not isinstance(ref, str) or not ref:
        raise BadInputError(f"{where}.{kind}: must be a non-empty string")
    if kind == "env":
        if not ENV_VAR_NAME.fullmatch(ref):
            raise BadInputError(f"{where}.env: {ref!r} is not an environment variable name")
        return SecretRef(env=ref)
    # Absolute, so every service started from this configuration reads the same file.
    return SecretRef(file=str(Path(ref).expanduser().resolve()))


def _secret_document(secret: SecretRef) -> dict[str, str]:
    return {"env": secret.env} if secret.env else {"file": secret.file}
