"""RAGAS embeddings from WordLlama's model as its wheel ships it (``evalsi.packs.text.embedding``: built from the
package's own files, nothing downloaded), for the one adapted metric that needs embeddings, answer relevancy.
Imported only in the RAGAS plugin's venv.
"""

from __future__ import annotations

from ragas.embeddings.base import BaseRagasEmbeddings  # type: ignore[import-not-found]

from evalsi.packs.text.embedding import wordllama_model

# WordLlama's full size: its smaller ones are truncations that only lose accuracy here.
DIMENSIONS = 256


class WordLlamaEmbeddings(BaseRagasEmbeddings):
    """WordLlama's average-pooled token embeddings (not normalized: RAGAS takes cosines itself)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = wordllama_model(DIMENSIONS).embed(texts, norm=False).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)
