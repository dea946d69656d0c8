"""The stores behind small interfaces: metadata, results and policies (SQLite or Postgres), objects (a directory or S3).

Services open them from URLs (``open_metadata_store``, ``open_object_store``) and code against the
``MetadataStore`` and ``ObjectStore`` protocols.
"""

from __future__ import annotations

from .metadata import (
    TASK_STATES,
    CaseImport,
    MetadataStore,
    StoredCase,
    StoredPolicy,
    TaskRow,
    TaskState,
    case_hash,
    decode_page_token,
    encode_page_token,
    policy_hash,
)
from .migrations import LATEST_VERSION, MIGRATIONS, Migration
from .objects import ConflictError, LocalObjectStore, ObjectStore, S3ObjectStore, content_key
from .sql import SqlMetadataStore
from .urls import open_metadata_store, open_object_store

__all__ = [  # noqa: RUF022 - grouped by topic, not alphabetically, for readers
    # Metadata and results
    "TASK_STATES",
    "CaseImport",
    "MetadataStore",
    "SqlMetadataStore",
    "StoredCase",
    "StoredPolicy",
    "TaskRow",
    "TaskState",
    "decode_page_token",
    "case_hash",
    "encode_page_token",
    "policy_hash",
    # Schema
    "LATEST_VERSION",
    "MIGRATIONS",
    "Migration",
    # Objects
    "ConflictError",
    "LocalObjectStore",
    "ObjectStore",
    "S3ObjectStore",
    "content_key",
    # Opening from configuration
    "open_metadata_store",
    "open_object_store",
]
