"""Ingest's gate with the metadata store: API keys created through AuthService, stored roles and bindings, and
refused exports in the audit log.

Without ``--metadata-url`` (or with authentication off) the gate is evalsi.yaml's alone, as before: configured keys,
configured roles, nothing audited here. With it, a collector's key created by ``evalsi auth keys create`` works
for OTLP too, and every refused export is an audit entry beside the api's. The api purges the log; ingest only
appends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.gate.access import Gate
from evalsi.gate.exposure import AccessSettings
from evalsi.service.lifecycle import Lifecycle

if TYPE_CHECKING:
    from evalsi.gate.stored_access import LiveAuthorizer


async def open_gate(access: AccessSettings, metadata_url: str, life: Lifecycle) -> Gate | None:
    """The receivers' gate (None when nobody is authenticated), its background work entered in ``life``."""
    if not access.enforced or not metadata_url:
        gate = access.gate()
    else:
        from evalsi.audit.config import load_audit_config, open_audit_log
        from evalsi.audit.decisions import decision_recorder
        from evalsi.authz.authorizer import Authorizer
        from evalsi.gate.stored_access import LiveAuthorizer
        from evalsi.stores import open_metadata_store
        from evalsi.stores.identity_keys import StoredKeyLookup

        store = await life.enter("metadata store", open_metadata_store(metadata_url), lambda s: s.close())
        authorizer = LiveAuthorizer(Authorizer.from_config(access.rbac, access.authorization), store)
        await life.enter("authorizer", _started(authorizer), lambda a: a.close())
        keys = StoredKeyLookup(store)
        life.on_stop("api key use", keys.flush)
        audit = await open_audit_log(load_audit_config(access.sections.get("audit")), store.append_audit, None,
                                     life, service_name="evalsi-ingest")
        gate = access.gate(key_lookup=keys, authorizer=authorizer, on_decision=decision_recorder(audit))
    if gate is not None and hasattr(gate.authenticator, "aclose"):
        life.on_stop("authenticator", gate.authenticator.aclose)
    if gate is not None and gate.external is not None:
        life.on_stop("external authorizer", gate.external.aclose)
    return gate


async def _started(authorizer: LiveAuthorizer) -> LiveAuthorizer:
    await authorizer.start()
    return authorizer
