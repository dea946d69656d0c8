"""What one LLM judge talks to: provider, model, endpoint, credentials, sampling params and limits.

``JudgeConfig`` is plain data. ``from_mapping`` is the single place that turns user-written YAML/JSON into
it, so every mistake is reported as a ``BadInputError`` naming the field path (``judges.default.provider``)
and what would be accepted.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from evalsi.errors import BadInputError

PROVIDERS: tuple[str, ...] = ("openai", "openai-compatible", "anthropic")
"""Provider names accepted in configs; ``openai-compatible`` is an alias of ``openai`` (same protocol)."""

_CANONICAL_PROVIDER = {"openai": "openai", "openai-compatible": "openai", "anthropic": "anthropic"}

DEFAULT_BASE_URLS: Mapping[str, str] = MappingProxyType(
    {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
)
DEFAULT_API_KEY_ENVS: Mapping[str, str] = MappingProxyType(
    {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
)

# The connector sets these itself; letting params override them would silently break the protocol
# (e.g. ``stream: true`` returns server-sent events the connector does not parse).
_RESERVED_PARAMS = frozenset({"model", "messages", "stream", "system"})

# "name@version": both parts non-empty, no whitespace; the judge pack resolves the template.
_TEMPLATE_RE = re.compile(r"^[^\s@]+@[^\s@]+$")


# What a credential reference may name as an environment variable (also a webhook signing secret's secretEnv).
ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class SecretRef:
    """Where a credential lives on the machine of the service that uses it: an environment variable or a file.

    Only the reference is ever configured, stored or sent; the value is read by the process that calls the
    provider, when it calls. Neither set means "no credential" (a local server that needs no auth header).
    """

    env: str = ""
    file: str = ""

    def read(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The credential, None when none is configured; ``BadInputError`` naming the reference (never the
        value) when it is configured but missing."""
        if self.env:
            value = (os.environ if environ is None else environ).get(self.env)
            if not value:
                raise BadInputError(f"the environment variable {self.env} holding the credential is not set")
            return value
        if self.file:
            try:
                with open(self.file, encoding="utf-8") as handle:
                    value = handle.read().strip()
            except OSError as exc:
                problem = exc.strerror or type(exc).__name__
                raise BadInputError(f"the credential file cannot be read ({problem})") from None
            if not value:
                raise BadInputError("the credential file is empty")
            return value
        return None


@dataclass(frozen=True)
class JudgeConfig:
    """One judge's model endpoint and call policy.

    Empty ``base_url`` / ``api_key_env`` mean "the provider's default" and are filled in at construction,
    so a built config always holds concrete values. ``provider`` is stored canonically (``openai`` for
    the ``openai-compatible`` alias) because both speak the same protocol and must share cache entries.
    ``params`` is copied (callers' dicts are not shared) with ``temperature`` defaulting to 0: judges should
    be as repeatable as the provider allows. A ``None`` value means "do not send this param" (e.g. models
    that reject ``temperature``). It stays a plain dict, not a read-only proxy, so configs pickle and
    ``dataclasses.asdict`` works; treat it as read-only.
    """

    model: str
    name: str = "default"
    provider: str = "openai"
    base_url: str = ""
    api_key_env: str = ""
    params: dict[str, Any] = field(default_factory=dict, hash=False)
    timeout_s: float = 60.0
    max_retries: int = 4
    rpm: int | None = None
    tpm: int | None = None
    template: str | None = None
    # A server connection's credential reference; when set it replaces api_key_env (and its provider default):
    # the key comes from the server's configuration, or there is none.
    secret: SecretRef | None = None

    def __post_init__(self) -> None:
        # Direct construction (code, tests) gets the same checks as from_mapping, reported under "judge".
        _check_provider(self.provider, "judge.provider")
        provider = _CANONICAL_PROVIDER[self.provider]
        object.__setattr__(self, "provider", provider)
        object.__setattr__(self, "base_url", (self.base_url or DEFAULT_BASE_URLS[provider]).rstrip("/"))
        if self.secret is None:
            object.__setattr__(self, "api_key_env", self.api_key_env or DEFAULT_API_KEY_ENVS[provider])
        elif self.api_key_env:
            raise BadInputError("judge.api_key_env: a judge with a configured credential takes no api_key_env")
        object.__setattr__(self, "params", {"temperature": 0, **dict(self.params)})
        if not self.model:
            raise BadInputError("judge.model: required (the provider's model id, e.g. gpt-4o-mini)")
        if self.timeout_s <= 0:
            raise BadInputError(f"judge.timeout_s: must be > 0, got {self.timeout_s}")
        if self.max_retries < 0:
            raise BadInputError(f"judge.max_retries: must be >= 0, got {self.max_retries}")

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any], where: str = "judge") -> JudgeConfig:
        """Build from user config (e.g. one entry of ``judges:`` in a spec), validating keys and types.

        ``where`` is the path of ``d`` in the user's document and prefixes every error message.
        """
        if not isinstance(d, Mapping):
            raise BadInputError(f"{where}: must be a mapping of judge settings, got {_type_name(d)}")
        known = [f.name for f in fields(cls) if f.name != "secret"]  # credentials come from server connections
        for key in d:
            if key not in known:
                raise BadInputError(f"{where}.{key}: unknown key{_suggest(str(key), known)}; "
                                    f"expected one of {', '.join(known)}")

        if "model" not in d:
            raise BadInputError(f"{where}.model: required (the provider's model id, e.g. gpt-4o-mini)")
        model = _str(d, "model", where)
        name = _str(d, "name", where, default="default")
        if not name:
            raise BadInputError(f"{where}.name: must be a non-empty string")
        provider = _str(d, "provider", where, default="openai")
        _check_provider(provider, f"{where}.provider")
        base_url = _str(d, "base_url", where, default="")
        if base_url and not base_url.startswith(("http://", "https://")):
            raise BadInputError(f"{where}.base_url: must start with http:// or https://, got {base_url!r}")
        api_key_env = _str(d, "api_key_env", where, default="")
        params = _params(d.get("params", {}), f"{where}.params")
        timeout_s = _number(d, "timeout_s", where, default=60.0)
        if timeout_s <= 0:
            raise BadInputError(f"{where}.timeout_s: must be > 0 seconds, got {timeout_s}")
        max_retries = _int(d, "max_retries", where, default=4, minimum=0)
        rpm = _optional_int(d, "rpm", where)
        tpm = _optional_int(d, "tpm", where)
        template = d.get("template")
        if template is not None and (not isinstance(template, str) or not _TEMPLATE_RE.match(template)):
            raise BadInputError(
                f"{where}.template: must be \"name@version\" (e.g. pairwise@1), got {template!r}"
            )
        return cls(model=model, name=name, provider=provider, base_url=base_url, api_key_env=api_key_env,
                   params=params, timeout_s=float(timeout_s), max_retries=max_retries, rpm=rpm, tpm=tpm,
                   template=template)

    def identity(self) -> dict[str, Any]:
        """What determines the answers (not how we call): the basis of cache keys and run manifests.

        Limits, retries, timeouts, the key's env var and the judge's name are deliberately absent: they
        change how fast we get an answer, not which answer.
        """
        return {"provider": self.provider, "model": self.model, "base_url": self.base_url,
                "params": dict(self.params)}

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The API key from the configured credential, else from ``api_key_env``; None when there is none
        (local servers need no auth header)."""
        if self.secret is not None:
            return self.secret.read(environ)
        env = os.environ if environ is None else environ
        return env.get(self.api_key_env) or None


def _check_provider(provider: object, path: str) -> None:
    if provider not in _CANONICAL_PROVIDER:
        raise BadInputError(f"{path}: must be one of {', '.join(PROVIDERS)}, got {provider!r}")


def _type_name(v: object) -> str:
    return "null" if v is None else type(v).__name__


def _suggest(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _str(d: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    v = d.get(key, default)
    if not isinstance(v, str) or (default is None and not v):
        raise BadInputError(f"{where}.{key}: must be a non-empty string, got {_type_name(v)} {v!r}")
    return v


def _number(d: Mapping[str, Any], key: str, where: str, default: float) -> float:
    v = d.get(key, default)
    # bool is an int subclass; "timeout_s: yes" is a mistake, not 1 second.
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise BadInputError(f"{where}.{key}: must be a number, got {_type_name(v)} {v!r}")
    return float(v)


def _int(d: Mapping[str, Any], key: str, where: str, default: int, minimum: int) -> int:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadInputError(f"{where}.{key}: must be an integer, got {_type_name(v)} {v!r}")
    if v < minimum:
        raise BadInputError(f"{where}.{key}: must be >= {minimum}, got {v}")
    return v


def _optional_int(d: Mapping[str, Any], key: str, where: str) -> int | None:
    if d.get(key) is None:
        return None
    return _int(d, key, where, default=0, minimum=1)


def _params(v: object, path: str) -> dict[str, Any]:
    if not isinstance(v, Mapping):
        raise BadInputError(f"{path}: must be a mapping of request parameters, got {_type_name(v)}")
    out: dict[str, Any] = {}
    for key, value in v.items():
        if not isinstance(key, str):
            raise BadInputError(f"{path}: keys must be strings, got {key!r}")
        if key in _RESERVED_PARAMS:
            raise BadInputError(f"{path}.{key}: set by Evals.si itself and cannot be overridden")
        out[key] = value
    try:
        # Params go into request bodies and cache keys, both JSON.
        json.dumps(out, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise BadInputError(
            f"{path}: values must be JSON (strings, numbers, booleans, lists, maps): {e}"
        ) from e
    for key in ("max_tokens", "seed"):
        if isinstance(out.get(key), float) and out[key].is_integer():
            out[key] = int(out[key])  # a spec's params travel as a protobuf Struct, whose numbers are all doubles
        if out.get(key) is not None and (isinstance(out[key], bool) or not isinstance(out[key], int)):
            raise BadInputError(f"{path}.{key}: must be an integer, got {_type_name(out[key])} {out[key]!r}")
    if "temperature" in out and out["temperature"] is not None and (
        isinstance(out["temperature"], bool) or not isinstance(out["temperature"], int | float)
    ):
        raise BadInputError(f"{path}.temperature: must be a number, got {out['temperature']!r}")
    return out
