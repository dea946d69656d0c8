"""Secrets by reference: what ``evalsi serve`` puts in a service's environment for the stores and an external NATS
is the path of the file evalsi.yaml names, in the variable its opener reads, never the secret itself."""

from __future__ import annotations

from pathlib import Path

from evalsi.service.config import Config
from evalsi.service.settings import NATS_CREDENTIALS
from evalsi.stores.urls import METADATA_PASSWORD_FILE_ENV, TRACES_PASSWORD_FILE_ENV

__all__ = ["bus_credentials", "store_credentials"]


def bus_credentials(config: Config) -> dict[str, str]:
    """``EVALSI_NATS_CREDENTIALS`` for an external NATS (``nats.url`` with ``nats.credentials_file``); the bundled
    nats-server's users are each service's own (``evalsi.service.bus_users``)."""
    if config.nats_url and config.nats_credentials_file:
        return {NATS_CREDENTIALS.variable(""): str(Path(config.nats_credentials_file).resolve())}
    return {}


def store_credentials(config: Config) -> dict[str, str]:
    """``EVALSI_METADATA_PASSWORD_FILE`` (``metadata.password_file``, read by ``evalsi.stores.urls``),
    ``EVALSI_TRACES_PASSWORD_FILE`` (``traces.password_file``, read by the ClickHouse trace store) and
    ``AWS_SHARED_CREDENTIALS_FILE`` (``objects.credentials_file``: botocore's own variable, whose chain reads the
    file's ``[default]`` profile), as absolute paths, when configured."""
    environment = {}
    if config.metadata_password_file:
        environment[METADATA_PASSWORD_FILE_ENV] = str(Path(config.metadata_password_file).resolve())
    if config.objects_credentials_file:
        environment["AWS_SHARED_CREDENTIALS_FILE"] = str(Path(config.objects_credentials_file).resolve())
    if config.traces_password_file:
        environment[TRACES_PASSWORD_FILE_ENV] = str(Path(config.traces_password_file).resolve())
    return environment
