"""The pack rules of a served project (evalsi.pack_policy) applied to what a request names.

A pack outside the project's allowlist is PERMISSION_DENIED (403) wherever an evaluator of it is named; a pack
allowed but not enabled is FAILED_PRECONDITION (400) for an online policy only: in Evaluate and CreateRun the
name is the opt-in.
"""

from __future__ import annotations

from collections.abc import Iterable

import grpc

from evalsi.api.errors import ApiError
from evalsi.auth.principal import PermissionDenied
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.pack_policy import SETTING, PackPolicy

# Where a project's packs are set, for the messages.
_WHERE = f"the server's evalsi.yaml ({SETTING}:)"


def refuse_unallowed(policy: PackPolicy, registry: Registry, project: str, refs: Iterable[tuple[str, str]]) -> None:
    """PERMISSION_DENIED naming each ``(where, ref)`` whose evaluator's pack ``project`` may not use. A ref
    that does not resolve is left to the request's own checks."""
    allowed = policy.allowed(project, registry.packs)
    outside = [(where, ref, pack) for where, ref, pack in _packs(registry, refs) if pack not in allowed]
    if outside:
        named = "; ".join(f"{where}: {ref} is in pack {pack!r}" for where, ref, pack in outside)
        raise PermissionDenied(
            f"{named}, which project {project!r} may not use: its allowed packs are "
            f"{', '.join(sorted(allowed)) or 'none'}; an admin allows a pack with {SETTING}.allowed_packs "
            f"(or {SETTING}.projects.{project}.allowed_packs) in {_WHERE}"
        )


def refuse_not_enabled(policy: PackPolicy, registry: Registry, project: str,
                       refs: Iterable[tuple[str, str]]) -> None:
    """FAILED_PRECONDITION naming each ``(where, ref)`` of an online policy whose pack ``project`` has not
    enabled, and how to enable it."""
    enabled = policy.enabled(project, {name: pack.default_on for name, pack in registry.packs.items()})
    off = [(where, ref, pack) for where, ref, pack in _packs(registry, refs) if pack not in enabled]
    if off:
        named = "; ".join(f"{where}: {ref} is in pack {pack!r}" for where, ref, pack in off)
        packs = sorted({pack for _, _, pack in off})
        raise ApiError(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"{named}, which project {project!r} has not enabled: online policies run only enabled packs "
            f"(enabled: {', '.join(sorted(enabled)) or 'none'}); enable {', '.join(packs)} with "
            f"{SETTING}.projects.{project}.packs in {_WHERE}",
        )


def _packs(registry: Registry, refs: Iterable[tuple[str, str]]) -> list[tuple[str, str, str]]:
    found = []
    for where, ref in refs:
        try:
            evaluator = registry.resolve(ref)
        except BadInputError:
            continue
        found.append((where, evaluator.ref, evaluator.pack))
    return found
