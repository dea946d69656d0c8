"""What every verb shares: exit codes, error reporting, flag parsing and the server options."""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar

import click

from evalsi.errors import BadInputError, EvalsiError
from evalsi.projects import PROJECT_RULE, is_project

if TYPE_CHECKING:
    from google.protobuf.message import Message

    from evalsi.client import Client

# Exit codes a CI can gate on (DESIGN.md).
EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_GATE_FAILED = 3
# What shells report for a run stopped by Ctrl-C.
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a tool killed by it

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(fn: F) -> F:
    """Map our errors to exit codes: bad input 2 with its message, anything unexpected 1 with a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BadInputError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except EvalsiError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_INTERNAL)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            # The reader went away (`evalsi eval --format json | head`): what it wanted was written. Point stdout at
            # devnull so the interpreter's final flush does not raise again, and exit as Unix tools do on SIGPIPE.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(EXIT_BROKEN_PIPE)
        except Exception:
            click.echo("internal error (a bug in evalsi; please report it with this trace):", err=True)
            traceback.print_exc()
            sys.exit(EXIT_INTERNAL)

    return wrapper  # type: ignore[return-value]


# What a "not found" adds: runs, traces and policies are looked up in one project, and these choose it.
CHOOSE_PROJECT = "choose the project with --project NAME or EVALSI_PROJECT=NAME (or client.project in ./evalsi.yaml)"


@contextmanager
def looking_in() -> Iterator[None]:
    """What the server does not have in the call's project becomes a message that says how to look in another."""
    from evalsi.client import NotFoundError

    try:
        yield
    except NotFoundError as exc:
        raise BadInputError(f"{exc}\nhint: {CHOOSE_PROJECT}") from None


def check_project_flag(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """``--project`` (or EVALSI_PROJECT) by the one project rule, refused (exit 2) before anything connects."""
    if value and not is_project(value):
        raise click.BadParameter(f"{value!r} is not a valid project name ({PROJECT_RULE})")
    return value


SERVER_HELP = (
    "The Evals.si server: grpc://127.0.0.1:8081 or http://127.0.0.1:8080, grpcs:// or https:// with TLS (default: "
    "$EVALSI_SERVER, else client.server in ./evalsi.yaml, else in ~/.config/evalsi/config.yaml)."
)
PROJECT_HELP = (
    "The project (default: $EVALSI_PROJECT, else client.project in ./evalsi.yaml, else in "
    "~/.config/evalsi/config.yaml, else 'default')."
)


TOKEN_HELP = (
    "A bearer token (JWT) for the server (default: $EVALSI_TOKEN, $EVALSI_TOKEN_FILE, a GitHub Actions job's OIDC "
    "token when $EVALSI_OIDC_AUDIENCE is set, else the login `evalsi login` cached). A flag is visible to other "
    "users in `ps`: prefer the variables."
)
API_KEY_HELP = "An evk_ API key for the server (default: $EVALSI_API_KEY). Prefer the variable: `ps` shows flags."
_CREDENTIAL_META = "evalsi.credential."


def _remember_credential(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    # Kept in the context, not passed to the command: every command gets them without a parameter of its own,
    # and client_for() reads them.
    if value is not None:
        ctx.meta[_CREDENTIAL_META + str(param.name)] = value


def credential_options(fn: F) -> F:
    """``--token`` and ``--api-key`` for a command that talks to a server; ``client_for`` sends them."""
    common: dict[str, Any] = {"default": None, "expose_value": False, "allow_from_autoenv": False,
                              "callback": _remember_credential}
    fn = click.option("--api-key", metavar="KEY", help=API_KEY_HELP, **common)(fn)
    return click.option("--token", metavar="TOKEN", help=TOKEN_HELP, **common)(fn)


def server_option(fn: F) -> F:
    """``--server`` and ``--project`` for a command that talks to a server, resolved by ``evalsi.client_config``
    (flag, variable, ./evalsi.yaml, the user's config) before the command runs: it receives ``server`` (a URL)
    and ``project`` (None when nothing names one). No server, or a bad value, is a usage error (exit 2) naming
    where the value came from; nothing has connected yet. ``--token`` and ``--api-key`` come with them."""

    @wraps(fn)
    def resolved(*args: Any, server: str | None, project: str | None, **kwargs: Any) -> Any:
        from evalsi.client_config import client_defaults

        try:
            defaults = client_defaults(server, project)
            url = defaults.require_server()
        except BadInputError as exc:
            raise click.UsageError(str(exc)) from None
        return fn(*args, server=url, project=defaults.project or None, **kwargs)

    option = click.option("--project", default=None, metavar="NAME", help=PROJECT_HELP)(credential_options(resolved))
    return click.option("--server", default=None, metavar="URL", help=SERVER_HELP)(option)  # type: ignore[return-value]


def client_for(server: str, project: str | None) -> Client:
    """A client for ``server`` with the credential of this command: ``--token``/``--api-key``, else the
    environment, else the login cached for the server (``evalsi.client_auth.sources``)."""
    from evalsi.client import Client
    from evalsi.client_auth.sources import default_credentials

    context = click.get_current_context(silent=True)
    meta = context.meta if context is not None else {}
    credentials = default_credentials(server, token=meta.get(_CREDENTIAL_META + "token"),
                                      api_key=meta.get(_CREDENTIAL_META + "api_key"))
    return Client(server, project=project, credentials=credentials)


def message_json(message: Message, indent: int | None = 2) -> str:
    """A protobuf message as JSON; protobuf's json_format loads here, not when `evalsi --help` starts."""
    from google.protobuf import json_format

    return json_format.MessageToJson(message, indent=indent)


def message_dict(message: Message) -> dict[str, Any]:
    from google.protobuf import json_format

    return json_format.MessageToDict(message)


def parse_value(text: str) -> Any:
    """A flag value as JSON when it parses (true, 0.5, [1,2], {"a":1}), else the string itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_params(items: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``--param exact-match.normalize=false`` into ``{"exact-match": {"normalize": False}}``."""
    params: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        alias, dot, name = key.rpartition(".")
        if not sep or not dot or not alias or not name:
            raise BadInputError(f"--param {item!r}: expected EVALUATOR.PARAM=VALUE, e.g. exact-match.normalize=false")
        params.setdefault(alias, {})[name] = parse_value(value)
    return params


def parse_key_values(items: Iterable[str], flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInputError(f"{flag} {item!r}: expected KEY=VALUE")
        out[key] = parse_value(value)
    return out


def split_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def warn_on_stderr(message: str) -> None:
    """A warning for the person at the terminal (the library's ``warn`` callbacks): one line on stderr."""
    click.echo(f"warning: {message}", err=True)
