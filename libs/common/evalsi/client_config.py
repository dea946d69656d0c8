"""Which server and project a client command talks to when its flags do not say: the client's defaults.

Highest first, each key on its own: the flag (``--server``, ``--project``), the environment (``EVALSI_SERVER``,
``EVALSI_PROJECT``), the ``client:`` section of ``./evalsi.yaml``, then that of the user's
``$XDG_CONFIG_HOME/evalsi/config.yaml`` (``~/.config/evalsi/config.yaml``)::

    client:
      server: http://127.0.0.1:8080     # or grpc://127.0.0.1:8081
      project: quickstart

``resolve`` is pure (flags, environment and the parsed sections in, the answer with where each value came from
out); ``client_defaults`` is the one place that reads the process's environment and files.
"""

from __future__ import annotations

import difflib
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError
from evalsi.masking import mask_url
from evalsi.projects import DEFAULT_PROJECT, check_project

SERVER_FLAG = "--server"
PROJECT_FLAG = "--project"
SERVER_ENV = "EVALSI_SERVER"
PROJECT_ENV = "EVALSI_PROJECT"
PROJECT_CONFIG = "evalsi.yaml"  # in the current directory; its other sections are the server's (service.config)
USER_CONFIG = Path("evalsi") / "config.yaml"  # under $XDG_CONFIG_HOME, else ~/.config
SECTION = "client"
KEYS = ("server", "project")
SERVER_SCHEMES = ("grpc", "grpcs", "http", "https")


@dataclass(frozen=True)
class ClientSection:
    """The ``client:`` section of one file: ``where`` names the file for messages."""

    where: str
    server: str = ""
    project: str = ""


@dataclass(frozen=True)
class ClientDefaults:
    """The server and project a command uses, each with the place it came from (``--server``, ``$EVALSI_SERVER``,
    ``./evalsi.yaml client.server``, ...). ``server`` is empty when nothing named one; ``project`` is empty when
    nothing named one (the server then uses ``default``)."""

    server: str = ""
    server_from: str = ""
    project: str = ""
    project_from: str = ""

    @property
    def effective_project(self) -> str:
        return self.project or DEFAULT_PROJECT

    def require_server(self) -> str:
        if not self.server:
            raise BadInputError(no_server_message())
        return self.server


def no_server_message() -> str:
    return (f"no server given: pass {SERVER_FLAG} URL, set {SERVER_ENV}, or set {SECTION}.server in "
            f"./{PROJECT_CONFIG} or ~/.config/{USER_CONFIG.as_posix()} (e.g. http://127.0.0.1:8080, which "
            "`evalsi serve` listens on)")


def parse_section(document: Any, where: str) -> ClientSection:
    """The ``client:`` section of a parsed config document (absent: empty); unknown keys and bad values are a
    BadInputError naming the file and key."""
    if document is None:
        return ClientSection(where)
    if not isinstance(document, Mapping):
        raise BadInputError(f"{where}: the config must be a mapping of keys")
    section = document.get(SECTION)
    if section is None:
        return ClientSection(where)
    if not isinstance(section, Mapping):
        raise BadInputError(f"{where}: {SECTION}: expected a mapping like {{server: http://127.0.0.1:8080, "
                            "project: default}}")
    for key in section:
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f"did you mean {close[0]}?" if close else f"accepted: {', '.join(KEYS)}"
            raise BadInputError(f"{where}: {SECTION}.{key}: unknown key; {hint}")
    values: dict[str, str] = {}
    for key in KEYS:
        value = section.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise BadInputError(f"{where}: {SECTION}.{key}: must be a string, got {value!r}")
        values[key] = _checked(key, value, f"{where} {SECTION}.{key}")
    return ClientSection(where, **values)


def resolve(
    *, server_flag: str | None, project_flag: str | None, env: Mapping[str, str], files: Sequence[ClientSection]
) -> ClientDefaults:
    """Each key from the first that gives it: the flag, the variable, then ``files`` in order (the project's
    evalsi.yaml before the user's config)."""
    server, server_from = _first(
        "server", [(server_flag, SERVER_FLAG), (env.get(SERVER_ENV), f"${SERVER_ENV}"),
                   *((f.server, f"{f.where} {SECTION}.server") for f in files)])
    project, project_from = resolve_project(project_flag=project_flag, env=env, files=files)
    return ClientDefaults(server, server_from, project, project_from)


def resolve_project(
    *, project_flag: str | None, env: Mapping[str, str], files: Sequence[ClientSection]
) -> tuple[str, str]:
    """The project alone and where it came from (commands that reach a store, not a server: ``evalsi cases``)."""
    return _first("project", [(project_flag, PROJECT_FLAG), (env.get(PROJECT_ENV), f"${PROJECT_ENV}"),
                              *((f.project, f"{f.where} {SECTION}.project") for f in files)])


def user_config_path(env: Mapping[str, str], home: Path) -> Path:
    """``$XDG_CONFIG_HOME/evalsi/config.yaml`` when the variable names an absolute directory (the XDG rule: a
    relative one is ignored), else ``~/.config/evalsi/config.yaml``."""
    base = env.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else home / ".config"
    return root / USER_CONFIG


def read_sections(cwd: Path, user_config: Path) -> list[ClientSection]:
    """The ``client:`` sections of ``./evalsi.yaml`` and the user's config, those that exist, in that order."""
    from evalsi.yaml_files import read_yaml_file  # PyYAML only when a server command runs

    sections = []
    for path, where in ((cwd / PROJECT_CONFIG, f"./{PROJECT_CONFIG}"), (user_config, str(user_config))):
        if path.is_file():
            sections.append(parse_section(read_yaml_file(path), where))
    return sections


def client_defaults(server_flag: str | None, project_flag: str | None) -> ClientDefaults:
    """The defaults of this process: its environment, its current directory and its user's config."""
    env = dict(os.environ)
    return resolve(server_flag=server_flag, project_flag=project_flag, env=env,
                   files=read_sections(Path.cwd(), user_config_path(env, Path.home())))


def client_project(project_flag: str | None) -> str:
    """This process's project (empty: none named, so ``default``), its server not needed."""
    env = dict(os.environ)
    files = read_sections(Path.cwd(), user_config_path(env, Path.home()))
    return resolve_project(project_flag=project_flag, env=env, files=files)[0]


def _first(key: str, candidates: Sequence[tuple[str | None, str]]) -> tuple[str, str]:
    for value, where in candidates:
        if value:
            return _checked(key, value, where), where
    return "", ""


def _checked(key: str, value: str, where: str) -> str:
    """A value by the rules of its key, refused naming where it came from (the flag, the variable or the file)."""
    if key == "project":
        return check_project(value, where)
    parsed = urllib.parse.urlparse(value)
    if parsed.scheme not in SERVER_SCHEMES or not parsed.netloc:
        raise BadInputError(f"{where}: {mask_url(value)!r} is not a server URL; use grpc://host:8081 or "
                            "http://host:8080 (grpcs:// or https:// for TLS)")
    return value
