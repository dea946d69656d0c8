"""Microsoft Presidio's analyzer as ``presidio/pii-leak``, served as an evaluator plugin in Presidio's own venv.

Importing this package never imports Presidio: it names where the plugin lives (``PLUGIN_DIR``, the directory
holding ``evalsi-plugin.yaml``), the pinned upstream and how the safety pack's PII kinds map to Presidio's entities.
The evaluator itself (``evalsi.adapters.presidio.analyzer``) imports Presidio and runs only inside the plugin's
venv, in the plugin's process: never on a runner's event loop. docs/safety-pack.md.
"""

from __future__ import annotations

from pathlib import Path

PLUGIN_DIR = Path(__file__).resolve().parent / "plugin"
UPSTREAM = "presidio-analyzer==2.2.366"
# The safety pack's PII kinds (packs/safety/detectors.PII_PATTERNS) as Presidio's entity names. Presidio has one
# IP_ADDRESS entity: its matches are told apart as ipv4 or ipv6 by the address itself.
ENTITIES = {"email": "EMAIL_ADDRESS", "phone": "PHONE_NUMBER", "credit_card": "CREDIT_CARD", "iban": "IBAN_CODE",
            "us_ssn": "US_SSN", "ipv4": "IP_ADDRESS", "ipv6": "IP_ADDRESS"}

__all__ = ["ENTITIES", "PLUGIN_DIR", "UPSTREAM"]
