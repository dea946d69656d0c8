"""Reading one value of the ``auth:`` section: each reader checks a type and names the key path when it is wrong.

``path`` is the evalsi.yaml key path of the value (``auth.jwt.providers[0].issuer``); every refusal starts with it
and says what is accepted, so a config error points at the exact line to fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from evalsi.auth.principal import ANY_PROJECT
from evalsi.durations import DURATION_HELP, parse_duration
from evalsi.errors import BadInputError
from evalsi.projects import PROJECT_RULE, is_project

Choice = TypeVar("Choice", bound=str)


def refuse(path: str, problem: str) -> BadInputError:
    return BadInputError(f"{path}: {problem}")


def mapping(value: Any, path: str, keys: Sequence[str], *, example: str = "") -> Mapping[str, Any]:
    """``value`` as a mapping whose keys are all among ``keys`` (``None``: empty); an unknown key is refused,
    with the closest known one suggested."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise refuse(path, f"expected a mapping{f' like {example}' if example else ''}, got {_kind(value)}")
    for key in value:
        if key not in keys:
            close = difflib.get_close_matches(str(key), keys, n=1)
            hint = f"did you mean {close[0]}?" if close else f"accepted: {', '.join(keys)}"
            raise refuse(f"{path}.{key}", f"unknown key; {hint}")
    return value


def text(value: Any, path: str, *, default: str | None = None, allow_empty: bool = False) -> str:
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or (not value and not allow_empty):
        raise refuse(path, f"expected a non-empty string, got {_kind(value)}")
    return value


def choice(value: Any, path: str, choices: tuple[Choice, ...], default: Choice) -> Choice:
    if value is None:
        return default
    for accepted in choices:
        if value == accepted:
            return accepted
    raise refuse(path, f"must be one of {', '.join(choices)}, got {value!r}")


def flag(value: Any, path: str, default: bool = False) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise refuse(path, f"expected true or false, got {_kind(value)}")
    return value


def positive_int(value: Any, path: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise refuse(path, f"expected a positive integer, got {value!r}")
    return value


def seconds(value: Any, path: str, default: float) -> float:
    """A human duration (``30s``, ``2m``, a number of seconds) as seconds."""
    if value is None:
        return default
    try:
        return float(parse_duration(value).removesuffix("s"))
    except ValueError:
        raise refuse(path, f"expected {DURATION_HELP}, got {value!r}") from None


def strings(value: Any, path: str, *, default: tuple[str, ...] = (), allow_empty: bool = True) -> tuple[str, ...]:
    """A list of non-empty strings (a single string is a list of one)."""
    if value is None:
        return default
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) and item for item in items):
        raise refuse(path, f"expected a list of non-empty strings, got {_kind(value)}")
    if not items and not allow_empty:
        raise refuse(path, "must name at least one")
    return tuple(items)


def string_map(value: Any, path: str) -> dict[str, str]:
    """Labels: a mapping of string keys to string values."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise refuse(path, f"expected a mapping of strings like {{app: checkout}}, got {_kind(value)}")
    for key, item in value.items():
        if not isinstance(key, str) or not key or not isinstance(item, str):
            raise refuse(f"{path}.{key}", f"labels map non-empty names to strings, got {_kind(item)}")
    return dict(value)


def project_roles(value: Any, path: str) -> dict[str, tuple[str, ...]]:
    """``{project | "*": [role, ...]}``: the roles a credential grants, per project."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise refuse(path, f"expected a mapping of projects to roles like {{support: [viewer]}}, got {_kind(value)}")
    roles: dict[str, tuple[str, ...]] = {}
    for project, names in value.items():
        if not isinstance(project, str) or not (project == ANY_PROJECT or is_project(project)):
            raise refuse(f"{path}.{project}", f"a project name ({PROJECT_RULE}) or \"*\" for every project")
        roles[project] = strings(names, f"{path}.{project}", allow_empty=False)
    return roles


def timestamp(value: Any, path: str) -> datetime | None:
    """An RFC 3339 time with a zone (``2027-01-31T00:00:00Z``); YAML may have parsed it already."""
    if value is None:
        return None
    parsed = value
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            parsed = None
    if not isinstance(parsed, datetime) or parsed.tzinfo is None:
        raise refuse(path, f"expected an RFC 3339 time with a zone like 2027-01-31T00:00:00Z, got {value!r}")
    return parsed


def items(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise refuse(path, f"expected a list, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str | int | float | bool):
        return repr(value)
    return type(value).__name__
