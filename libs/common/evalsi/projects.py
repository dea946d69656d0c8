"""What names a project, once: the API, ingest, the CLI, run specs, policies and bus subjects all use this rule.

A project is a partition key of every store and one token of bus subjects (``traces.completed.<project>``),
so a name must survive both unchanged: no dots (a subject separator), no spaces, ``*`` or ``>`` (NATS
wildcards). One rule everywhere means a trace ingested under a name can always be read back through the API.
"""

from __future__ import annotations

import re
from typing import Final

from evalsi.errors import BadInputError

DEFAULT_PROJECT: Final = "default"
# The transport header naming a call's project (gRPC metadata, HTTP, OTLP receivers).
PROJECT_HEADER: Final = "x-evalsi-project"
# The label a run or policy document may name its project with (besides metadata.project).
PROJECT_LABEL: Final = "evals.si/project"
# The OTLP resource attribute naming the project of a resource's spans and logs.
PROJECT_ATTRIBUTE: Final = "evalsi.project"

PROJECT_MAX_CHARS: Final = 63
PROJECT_RULE: Final = (
    f"letters, digits, '-' and '_', starting with a letter or digit, at most {PROJECT_MAX_CHARS} characters"
)
_PROJECT = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_-]{{0,{PROJECT_MAX_CHARS - 1}}}")


def is_project(value: str) -> bool:
    return _PROJECT.fullmatch(value) is not None


def check_project(value: str, where: str) -> str:
    """``value`` when it names a project, else a BadInputError naming ``where`` it came from and the rule."""
    if not is_project(value):
        raise BadInputError(f"{where}: {value!r} is not a valid project name ({PROJECT_RULE})")
    return value
