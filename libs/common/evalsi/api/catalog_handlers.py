"""CatalogService: the evaluators this server offers, with their packs."""

from __future__ import annotations

from evalsi.api.context import CallContext
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.v1alpha1.catalog_service_pb2 import ListEvaluatorsRequest, ListEvaluatorsResponse, PackInfo


class CatalogHandlers:
    """The evaluators this deployment offers, by pack."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        # The registry does not change while the server runs: build each manifest once.
        self._manifests = {ev.ref: ev.manifest() for ev in registry.evaluators()}

    @property
    def registry(self) -> Registry:
        return self._registry

    async def list_evaluators(self, request: ListEvaluatorsRequest, ctx: CallContext) -> ListEvaluatorsResponse:
        pack = request.pack.strip() or None
        try:
            evaluators = self._registry.evaluators(pack)
        except BadInputError as exc:
            raise BadInputError(f"pack: {exc}") from None
        response = ListEvaluatorsResponse(evaluators=[self._manifests[ev.ref] for ev in evaluators])
        for name, info in sorted(self._registry.packs.items()):
            if pack is None or name == pack:
                count = len(self._registry.evaluators(name))
                response.packs.append(
                    PackInfo(name=name, description=info.description, default_on=info.default_on, evaluators=count)
                )
        return response
