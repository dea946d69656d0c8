"""CatalogService: the evaluators this server offers the calling project, with their packs and tiers."""

from __future__ import annotations

from evalsi.api.context import CallContext
from evalsi.api.live_packs import LivePacks
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.pack_policy import PackPolicy
from evalsi.v1alpha1.catalog_service_pb2 import (
    ListEvaluatorsRequest,
    ListEvaluatorsResponse,
    PackInfo,
    ProjectPacks,
    SetPackAllowlistRequest,
    SetProjectPacksRequest,
)
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorManifest

# Distinct (pack, all_packs, enabled, allowed) answers kept: they vary with the configured projects only, but a
# bound keeps a config with thousands of projects from holding thousands of answers.
_MAX_ANSWERS = 256


class CatalogHandlers:
    """The evaluators this deployment offers a project: its enabled packs' (every allowed pack's with
    ``all_packs``, one pack's with ``pack``), and every installed pack with its tier and whether the project has
    it enabled and allowed (evalsi.pack_policy)."""

    def __init__(self, registry: Registry, packs: LivePacks | None = None) -> None:
        """``packs``: evalsi.yaml's evaluators: section and the lists stored through the API (none: every project
        has the default-on packs enabled and every pack allowed, and nothing can be stored)."""
        self._registry = registry
        self._packs = packs or LivePacks(PackPolicy())
        self._installed = {name: pack.default_on for name, pack in registry.packs.items()}
        # The registry does not change while the server runs, so each answer is built once: building it per
        # call (sorting the registry per pack, copying every manifest) cost ~0.5 ms of the api's CPU a call, more
        # than grpc's own. The answers are shared and never mutated: the transports only serialize them.
        self._manifests = {ev.ref: registry.manifest(ev) for ev in registry.evaluators()}
        self._answers: dict[tuple[str | None, bool, frozenset[str], frozenset[str]], ListEvaluatorsResponse] = {}

    @property
    def registry(self) -> Registry:
        return self._registry

    async def list_evaluators(self, request: ListEvaluatorsRequest, ctx: CallContext) -> ListEvaluatorsResponse:
        pack = request.pack.strip() or None
        if pack is not None and pack not in self._installed:
            installed = ", ".join(sorted(self._installed))
            raise BadInputError(f"pack: unknown pack {pack!r}; installed packs: {installed}")
        policy = self._packs.current()
        allowed = policy.allowed(ctx.project, self._installed)
        enabled = policy.enabled(ctx.project, self._installed)
        key = (pack, request.all_packs, enabled, allowed)
        answer = self._answers.get(key)
        if answer is None:
            answer = _answer(self._registry, self._manifests, pack, listed=allowed if request.all_packs else enabled,
                             enabled=enabled, allowed=allowed)
            if len(self._answers) < _MAX_ANSWERS:
                self._answers[key] = answer
        return answer

    async def set_project_packs(self, request: SetProjectPacksRequest, ctx: CallContext) -> ProjectPacks:
        project = ctx.resolve_project(request.project)
        packs = request.packs if request.HasField("packs") else None
        return await self._packs.set_enabled(project, packs, self._installed, ctx.principal.id)

    async def set_pack_allowlist(self, request: SetPackAllowlistRequest, ctx: CallContext) -> ProjectPacks:
        project = ctx.resolve_project(request.project)
        packs = request.allowed_packs if request.HasField("allowed_packs") else None
        return await self._packs.set_allowed(project, packs, self._installed, ctx.principal.id)


def _answer(registry: Registry, manifests: dict[str, EvaluatorManifest], pack: str | None, *,
            listed: frozenset[str], enabled: frozenset[str], allowed: frozenset[str]) -> ListEvaluatorsResponse:
    """One pack's evaluators when ``pack`` names it, else those of the ``listed`` packs; the pack list says of
    each installed pack (or the one named) its tier and whether it is enabled and allowed."""
    shown = {pack} if pack is not None else listed
    response = ListEvaluatorsResponse(
        evaluators=[manifests[ev.ref] for ev in registry.evaluators() if ev.pack in shown]
    )
    for name, info in sorted(registry.packs.items()):
        if pack is None or name == pack:
            response.packs.append(PackInfo(
                name=name, description=info.description, default_on=info.default_on,
                evaluators=len(registry.evaluators(name)), tier=info.tier, upstream=info.upstream,
                enabled=name in enabled, allowed=name in allowed,
            ))
    return response
