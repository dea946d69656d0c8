"""The stores behind small interfaces: metadata, results and policies (SQLite or Postgres), objects (a directory or S3).

Services open them from URLs (``open_metadata_store``, ``open_object_store``) and code against the protocols,
each declared once beside its store: ``MetadataStore`` and its roles ``RunStore`` (the run driver's),
``PolicyStore`` and ``CaseStore`` (``metadata``); ``PolicyAlertStore`` (``policy_alerts``); ``ObjectStore`` and its
content-addressed half ``BlobStore`` (``objects``); the trace store's (``traces.protocol``).
"""

from __future__ import annotations

from .case_reports import CaseReportStore, StoredCaseReport
from .metadata import (
    TASK_STATES,
    CaseImport,
    CaseStore,
    MetadataStore,
    PolicyStore,
    RunStore,
    StoredCase,
    StoredPolicy,
    TaskEnd,
    TaskRow,
    TaskState,
    case_hash,
    decode_page_token,
    encode_page_token,
    policy_hash,
)
from .migrations import LATEST_VERSION, MIGRATIONS, Migration
from .objects import BlobStore, ConflictError, LocalObjectStore, ObjectStore, S3ObjectStore, content_key
from .policy_alerts import FiredAlert, PolicyAlertStore
from .project_packs import ProjectPacksStore, StoredPacks
from .sql import SqlMetadataStore
from .urls import open_metadata_store, open_object_store

__all__ = [  # noqa: RUF022 - grouped by topic, not alphabetically, for readers
    # Metadata and results
    "TASK_STATES",
    "CaseImport",
    "CaseReportStore",
    "CaseStore",
    "MetadataStore",
    "FiredAlert",
    "PolicyAlertStore",
    "PolicyStore",
    "ProjectPacksStore",
    "StoredPacks",
    "RunStore",
    "SqlMetadataStore",
    "StoredCase",
    "StoredCaseReport",
    "StoredPolicy",
    "TaskEnd",
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
    "BlobStore",
    "ConflictError",
    "LocalObjectStore",
    "ObjectStore",
    "S3ObjectStore",
    "content_key",
    # Opening from configuration
    "open_metadata_store",
    "open_object_store",
]
