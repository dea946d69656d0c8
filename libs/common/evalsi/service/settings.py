"""Service settings from flags, one environment scheme and ``evalsi.yaml``.

Precedence, highest first: the flag, its environment variable, the key in the ``evalsi.yaml`` that ``--config``
(``EVALSI_CONFIG``) names, the default. A service's own key is read from ``EVALSI_<SERVICE>_<KEY>``; keys every
service shares (the bus, the stores, logging) from ``EVALSI_<KEY>``, so one environment configures them all.
``--help`` lists every flag with its variable and its evalsi.yaml key.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from evalsi.bus.credentials import NatsCredentials, read_credentials
from evalsi.errors import BadInputError
from evalsi.service.config import Config
from evalsi.service.defaults import DEFAULT_METADATA_URL, DEFAULT_OBJECTS_URL
from evalsi.service.logging import FORMATS, LEVELS

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
CONFIG_ENV = "EVALSI_CONFIG"


@dataclass(frozen=True)
class Option:
    """One setting: its flag, its type and where else its value may come from."""

    flag: str
    kind: Callable[[str], Any] = str
    default: Any = None
    help: str = ""
    key: str = ""  # the variable's key; by default the flag's name (``--lease-ttl``: LEASE_TTL)
    shared: bool = False  # EVALSI_<KEY>, read by every service, rather than EVALSI_<SERVICE>_<KEY>
    config: str = ""  # its evalsi.yaml key path (``api.http_port``); empty: none
    choices: tuple[str, ...] = ()
    switch: bool = False  # a flag without a value; its variable is 1/0 (true/false, yes/no, on/off)
    repeat: bool = False  # may be given several times (a list); no variable
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def variable(self, service: str) -> str:
        key = (self.key or self.dest).upper()
        return f"EVALSI_{key}" if self.shared else f"EVALSI_{service.upper()}_{key}"


# The keys every service reads unprefixed; a service takes the ones it uses, with its own default or help.
NATS = Option("--nats", default="nats://127.0.0.1:4222", help="NATS server URL", key="nats_url", shared=True,
              config="nats.url", metavar="URL")
# A file, by path: the password never on a command line nor in a URL (which logs and `ps` show).
NATS_CREDENTIALS = Option("--nats-credentials", default="", help="this service's NATS credentials: a file holding "
                          "user:password or a NATS .creds file (evalsi serve makes one per service)",
                          key="nats_credentials", shared=True, config="nats.credentials_file", metavar="FILE")
METADATA_URL = Option("--metadata-url", default=DEFAULT_METADATA_URL, help="metadata store URL",
                      shared=True, config="metadata.url", metavar="URL")
OBJECTS_URL = Option("--objects-url", default=DEFAULT_OBJECTS_URL, help="object store: a directory or s3:// URL",
                     shared=True, config="objects.url", metavar="URL")
TRACES_URL = Option("--traces-url", default="sqlite:///.evalsi/state/traces.db",
                    help="trace store: sqlite:///PATH or clickhouse://HOST:PORT/DB", shared=True, config="traces.url",
                    metavar="URL")
DATASETS_DIR = Option("--datasets-dir", default=".", help="directory run datasets are read from (and confined to)",
                      shared=True, config="datasets_dir", metavar="DIR")
# Checked by configure_logging, whose error names the flag and the accepted levels (exit 2).
LOG_LEVEL = Option("--log-level", default="info", help=f"log lines at this level and above: {', '.join(LEVELS)}",
                   shared=True)
LOG_FORMAT = Option("--log-format", default="json", help="json: one object per line; text: for a terminal",
                    shared=True, choices=FORMATS)
METRICS_PORT = Option("--metrics-port", kind=int, default=0, help="port for /healthz, /readyz and /metrics (0: none)")
LOGGING = (LOG_LEVEL, LOG_FORMAT)


def nats_credentials(path: str) -> NatsCredentials | None:
    """The credentials in the file ``--nats-credentials`` names (None when it names none); a BadInputError naming
    the flag when the file is unusable, before the service connects."""
    return read_credentials(path, f"{NATS_CREDENTIALS.flag} (${NATS_CREDENTIALS.variable('')})") if path else None


def option(base: Option, **changes: Any) -> Option:
    """A shared option with this service's default or help."""
    return replace(base, **changes)


def build_parser(service: str, options: Sequence[Option], *, description: str,
                 environ: Mapping[str, str], argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The service's parser, each default already resolved from the variable, evalsi.yaml or the default."""
    document, config_path = _config_document(argv, environ)
    parser = argparse.ArgumentParser(
        prog=f"evalsi-{service}", description=description,
        allow_abbrev=False,  # a renamed flag in a deployment must fail, not match the prefix of another
    )
    parser.add_argument("--config", default=config_path, metavar="FILE",
                        help=f"evalsi.yaml to read settings from, below flags and variables (${CONFIG_ENV})")
    for item in options:
        _add(parser, service, item, environ, document)
    return parser


def parse(service: str, options: Sequence[Option], argv: Sequence[str] | None, *, description: str,
          environ: Mapping[str, str]) -> argparse.Namespace:
    """Flags over environment over evalsi.yaml over defaults; a bad value is a BadInputError naming its source."""
    args = list(sys.argv[1:] if argv is None else argv)
    return build_parser(service, options, description=description, environ=environ, argv=args).parse_args(args)


def _add(parser: argparse.ArgumentParser, service: str, item: Option, environ: Mapping[str, str],
         document: Mapping[str, Any]) -> None:
    if item.repeat:
        parser.add_argument(item.flag, action="append", default=[], metavar=item.metavar,
                            help=f"{item.help} (repeatable)")
        return
    variable = item.variable(service)
    value = item.default
    configured = _lookup(document, item.config) if item.config else None
    if configured is not None:
        value = _convert(item, configured, f"evalsi.yaml {item.config}")
    raw = environ.get(variable)
    if raw is not None:
        value = _convert(item, raw, variable)
    where = f"${variable}" + (f", evalsi.yaml {item.config}" if item.config else "")
    text = f"{item.help} ({where}; default {item.default!r})" if item.help else f"({where})"
    if item.switch:
        parser.add_argument(item.flag, action="store_true", default=bool(value), help=text)
        return
    parser.add_argument(item.flag, type=item.kind, default=value, choices=item.choices or None,
                        metavar=item.metavar, help=text)


def _convert(item: Option, raw: Any, source: str) -> Any:
    if item.switch:
        text = str(raw).strip().lower()
        if isinstance(raw, bool) or text in (*_TRUE, *_FALSE):
            return raw if isinstance(raw, bool) else text in _TRUE
        raise BadInputError(f"{source}={raw!r}: expected 1 or 0 (true/false, yes/no, on/off)")
    try:
        value = item.kind(str(raw))
    except (ValueError, argparse.ArgumentTypeError):
        name = getattr(item.kind, "__name__", "a value").lstrip("_").replace("_", " ")
        raise BadInputError(f"{source}={raw!r}: expected {name}") from None
    if item.choices and value not in item.choices:
        raise BadInputError(f"{source}={raw!r}: expected one of {', '.join(item.choices)}")
    return value


def _config_document(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[Mapping[str, Any], str | None]:
    """The evalsi.yaml named by ``--config`` or ``EVALSI_CONFIG`` (validated as a whole), or nothing."""
    probe = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    probe.add_argument("--config")
    known, _ = probe.parse_known_args(list(argv))
    path = known.config or environ.get(CONFIG_ENV) or None
    if not path:
        return {}, None
    Config.load(path)  # every key checked, errors naming the key path
    document = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return document, path


def _lookup(document: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted key path; None when absent or empty (an empty URL means "not configured")."""
    value: Any = document
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return None if value == "" else value
