"""The api's identity and access parts, assembled from evalsi.yaml's auth, rbac and authorization sections.

With authentication on: A1's authenticator (configured keys and those stored in the database), the live
authorizer (config plus stored roles and bindings), the audit log of refused and mutating calls, the gate over
them, and AuthService's handlers. TLS (``auth.tls``) and ``/.well-known/evalsi-auth`` are served whether or not
enforcement is on (``--no-auth`` keeps the rest of the section in place, unenforced).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog

from evalsi.gate.access import Gate
from evalsi.gate.exposure import AccessSettings
from evalsi.gate.tls import ServerTls
from evalsi.service.lifecycle import Lifecycle

log = structlog.get_logger("evalsi.api")


@dataclass(frozen=True)
class ServedAccess:
    gate: Gate | None
    tls: ServerTls | None
    login: dict[str, Any]
    auth_handlers: Any  # AuthHandlers


async def open_access(settings: AccessSettings, store: Any, registry: Any, life: Lifecycle, *,
                      metrics: Any = None) -> ServedAccess:
    """The gate, TLS and AuthService of the api, their background work entered in ``life`` (stopped in reverse)."""
    tls = settings.tls()
    login = settings.login()
    from evalsi.api.auth_handlers import AuthHandlers

    if not settings.enforced or settings.auth is None:
        # AuthService still answers, for the anonymous owner of an unauthenticated server (WhoAmI says so).
        return ServedAccess(None, tls, login, AuthHandlers(store))
    from evalsi.audit.config import load_audit_config, open_audit_log
    from evalsi.audit.decisions import decision_recorder
    from evalsi.authz.attributes import AttributeSources, runs_code_by_pool
    from evalsi.authz.authorizer import Authorizer
    from evalsi.gate.stored_access import LiveAuthorizer
    from evalsi.stores.identity_keys import StoredKeyLookup

    base = Authorizer.from_config(settings.rbac, settings.authorization)
    authorizer = await life.enter("authorizer", _started(LiveAuthorizer(base, store)), lambda a: a.close())
    keys = StoredKeyLookup(store)
    life.on_stop("api key use", keys.flush)
    audit = await open_audit_log(load_audit_config(settings.sections.get("audit")), store.append_audit,
                                 store.purge_audit, life, registry=metrics)
    gate = settings.gate(key_lookup=keys, authorizer=authorizer, on_decision=decision_recorder(audit),
                         sources=AttributeSources(runs_code=runs_code_by_pool(registry)), metrics=metrics)
    assert gate is not None  # enforced, so there is one
    authenticator = gate.authenticator
    start = getattr(authenticator, "start", None)
    if start is not None:
        try:  # the providers' keys now, so the first request does not wait; a failure is retried on use
            await start()
        except Exception as exc:
            log.warning("could not read the JWT providers' keys yet; retried on the first token", error=str(exc))
    closing = getattr(authenticator, "aclose", None)
    if closing is not None:
        life.on_stop("authenticator", closing)
    if gate.external is not None:
        life.on_stop("external authorizer", gate.external.aclose)
    handlers = AuthHandlers(store, rbac=base.rbac, authorizer=authorizer, audit=audit,
                            config_keys=settings.auth.api_keys.keys if settings.auth.api_keys else ())
    return ServedAccess(gate, tls, login, handlers)


async def _started(authorizer: Any) -> Any:
    await authorizer.start()
    return authorizer
