"""Log output of the service processes: one JSON object per line on stderr (DESIGN.md, structured logs), or
plain text for a terminal (`--log-format text`).

Both structlog loggers and standard-library loggers (ours under ``evalsi.*`` and libraries' such as nats or
aiohttp) end up in the same JSON lines, so one log collector parses every service the same way. stdout is left
alone: services print their one "listening"/"ready" line there for the supervisor and the tests.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
import structlog.tracebacks

from evalsi.errors import BadInputError
from evalsi.masking import flags_with_secrets, mask_urls_in

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("json", "text")
# Tracebacks as dicts, without the frames' local variables: those hold passwords (a DSN parsed by asyncpg into
# ConnectionParameters), API keys and request bodies, which no log line may carry.
_TRACEBACKS = structlog.processors.ExceptionRenderer(
    structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
)


def ids(**fields: object) -> dict[str, object]:
    """The ``extra=`` of a standard-library log call carrying ids (run_id, task_key, project, trace_id):

        log.info("run finished", extra=ids(run_id=run.id, project=run.project))

    They become fields of the JSON line, not words of its text, so a collector filters on them; None is left out.
    """
    return {name: value for name, value in fields.items() if value is not None}


def configure_logging(level: str, log_format: str = "json") -> None:
    """Lines on stderr at ``level`` ("debug", "info", "warning" or "error") and above: JSON objects, or text for
    a terminal (``log_format`` "text").

    Each line has ``timestamp`` (ISO 8601, UTC), ``level`` and ``event`` (the message, ``%s`` arguments
    already applied); standard-library records add ``logger`` and the fields given with ``extra=`` (see ids), and
    an exception is ``exception``, a list of dicts rather than a text traceback, so it stays one line.
    """
    name = level.strip().lower()
    if name not in LEVELS:
        # Checked here, not left to logging: an unknown name would otherwise surface as a traceback at startup.
        raise BadInputError(f"--log-level {level}: use {', '.join(LEVELS)}")
    if log_format not in FORMATS:
        raise BadInputError(f"--log-format {log_format}: use {', '.join(FORMATS)}")
    numeric = logging.getLevelNamesMapping()[name.upper()]
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    render: list[Any] = (
        [_TRACEBACKS, structlog.processors.JSONRenderer()] if log_format == "json"
        else [structlog.dev.ConsoleRenderer(colors=False)]
    )
    # Typed loosely: structlog's processor type has no room for a last step that takes and returns the line.
    chain: list[Any] = [*shared, *render, _mask_urls]
    formatter_chain: list[Any] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta, *render, _mask_urls]
    structlog.configure(
        processors=chain,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=formatter_chain,
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, structlog.stdlib.ExtraAdder()],
        )
    )
    root = logging.getLogger()
    # Replaced, not appended to: a handler installed earlier (basicConfig by an import) would print each record
    # a second time as plain text.
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    flags = flags_with_secrets(sys.argv[1:])
    if flags:
        logging.getLogger("evalsi.service").warning(
            "%s: a password or token on the command line, where every user of this machine reads it (ps, "
            "/proc/<pid>/cmdline); give it in the flag's EVALSI_* environment variable instead (--help names it)",
            ", ".join(flags),
        )


def _mask_urls(_logger: Any, _method: str, line: str) -> str:
    """The last step of every chain: a URL anywhere in the line (a message, an exception, a traceback) shows no
    password."""
    return mask_urls_in(line) if "://" in line else line
