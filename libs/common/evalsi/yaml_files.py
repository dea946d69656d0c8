"""Reading a YAML (or JSON) file with errors that name the file and line: the one reader config files share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from evalsi.errors import BadInputError


def read_yaml_file(path: str | Path) -> Any:
    """The document in ``path`` (``{}`` for an empty file); a missing file or bad YAML is a ``BadInputError``."""
    source = Path(path)
    try:
        return yaml.safe_load(source.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise BadInputError(f"{source}: no such config file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else str(source)
        raise BadInputError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
