"""The Presidio plugin's entrypoint: sealed offline before Presidio (and tldextract) is imported, then the pack."""

from evalsi.adapters.presidio.offline import seal

seal()

from evalsi.adapters.presidio.analyzer import PACK as pack  # noqa: E402  (after seal: tldextract reads it on import)

__all__ = ["pack"]
