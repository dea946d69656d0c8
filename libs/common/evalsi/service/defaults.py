"""Where the standalone deployment keeps its state unless told otherwise: one place for evalsi.yaml's defaults,
the services' flags and the CLI's help, importable without the configuration machinery (yaml, connections)."""

from typing import Final

DEFAULT_METADATA_URL: Final = "sqlite:///.evalsi/state/evalsi.db"
DEFAULT_OBJECTS_URL: Final = ".evalsi/state/objects"
