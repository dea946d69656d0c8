"""The RAGAS plugin's entrypoint: sealed offline before RAGAS is imported, then the adapter's pack."""

from evalsi.adapters.ragas.offline import seal

seal()

from evalsi.adapters.ragas.metrics import PACK as pack  # noqa: E402  (after seal: RAGAS reads its opt-out on import)

__all__ = ["pack"]
