"""Run with the Presidio plugin venv's python: Presidio's AnalyzerEngine used directly, as Presidio's docs build it
with a spaCy pipeline (a blank English one saved to disk: no model can be downloaded here), under the offline
guard and with tldextract left at its defaults (not sealed).

argv: a JSON file of texts, and a directory for the pipeline. Prints JSON: for each text Presidio's results
(entity, start, end, score) for the safety pack's entities, and the network attempts the guard refused.
"""

from __future__ import annotations

import json
import sys

from evalsi.testing import offline_guard

offline_guard.install()

import spacy  # noqa: E402
from presidio_analyzer import AnalyzerEngine  # noqa: E402
from presidio_analyzer.nlp_engine import NlpEngineProvider  # noqa: E402

ENTITIES = ["CREDIT_CARD", "EMAIL_ADDRESS", "IBAN_CODE", "IP_ADDRESS", "PHONE_NUMBER", "US_SSN"]

with open(sys.argv[1], encoding="utf-8") as file:
    texts = json.load(file)
spacy.blank("en").to_disk(sys.argv[2])
configuration = {"nlp_engine_name": "spacy", "models": [{"lang_code": "en", "model_name": sys.argv[2]}]}
engine = AnalyzerEngine(nlp_engine=NlpEngineProvider(nlp_configuration=configuration).create_engine(),
                        supported_languages=["en"])
found = [[[hit.entity_type, hit.start, hit.end, hit.score]
          for hit in engine.analyze(text=text, entities=ENTITIES, language="en")] for text in texts]
print(json.dumps({"found": found, "blocked": offline_guard.blocked}))
