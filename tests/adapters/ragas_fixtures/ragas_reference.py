"""RAGAS's own scores, for the contract test: run with the RAGAS plugin venv's python.

``python ragas_reference.py BASE_URL MODEL ROWS_JSON`` scores each row with each metric by RAGAS's own
``metric.single_turn_ascore(sample)``, its LLM RAGAS's own LangChain wrapper over ``ChatOpenAI`` pointed at the
test's scripted OpenAI-compatible server, and prints ``{metric: {row id: score}}`` as JSON (NaN as null).
The samples are built from the rows here, not by the adapter's mapping, so the test checks that too.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import warnings

warnings.simplefilter("ignore")  # RAGAS's deprecation notices on stderr are not results

from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from ragas import SingleTurnSample  # noqa: E402
from ragas.embeddings.base import LangchainEmbeddingsWrapper  # noqa: E402
from ragas.llms.base import LangchainLLMWrapper  # noqa: E402
from ragas.metrics._answer_correctness import AnswerCorrectness  # noqa: E402
from ragas.metrics._answer_relevance import ResponseRelevancy  # noqa: E402
from ragas.metrics._context_entities_recall import ContextEntityRecall  # noqa: E402
from ragas.metrics._context_precision import LLMContextPrecisionWithReference  # noqa: E402
from ragas.metrics._context_recall import LLMContextRecall  # noqa: E402
from ragas.metrics._factual_correctness import FactualCorrectness  # noqa: E402
from ragas.metrics._faithfulness import Faithfulness  # noqa: E402
from ragas.metrics._noise_sensitivity import NoiseSensitivity  # noqa: E402

from evalsi.packs.text.embedding import wordllama_model  # noqa: E402


class WordLlama(Embeddings):
    """A LangChain embeddings model over WordLlama's shipped weights, wrapped the way RAGAS wraps LangChain's."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return wordllama_model(256).embed(texts, norm=False).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


METRICS = {
    "ragas/faithfulness": lambda: Faithfulness(),
    "ragas/context-precision": lambda: LLMContextPrecisionWithReference(),
    "ragas/context-recall": lambda: LLMContextRecall(),
    "ragas/context-entity-recall": lambda: ContextEntityRecall(),
    "ragas/factual-correctness": lambda: FactualCorrectness(),
    "ragas/answer-correctness": lambda: AnswerCorrectness(weights=[1.0, 0.0]),
    "ragas/answer-relevancy": lambda: ResponseRelevancy(embeddings=LangchainEmbeddingsWrapper(WordLlama())),
    "ragas/noise-sensitivity": lambda: NoiseSensitivity(),
}


async def main(base_url: str, model: str, rows: list[dict]) -> dict[str, dict[str, float | None]]:
    # bypass_n: n completions as n requests (the local server answers one choice per request, as our judge asks)
    llm = LangchainLLMWrapper(ChatOpenAI(model=model, base_url=base_url, api_key="unused", max_retries=0),
                              bypass_n=True)
    scores: dict[str, dict[str, float | None]] = {}
    for name, make in METRICS.items():
        metric = make()
        metric.llm = llm
        scores[name] = {}
        for row in rows:
            sample = SingleTurnSample(user_input=row["input"], response=row["output"],
                                      retrieved_contexts=row["context"], reference=row["reference"])
            value = await metric.single_turn_ascore(sample)
            scores[name][row["id"]] = None if math.isnan(value) else value
    return scores


if __name__ == "__main__":
    with open(sys.argv[3], encoding="utf-8") as handle:
        given = json.load(handle)
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2], given))))
