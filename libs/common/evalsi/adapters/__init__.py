"""Framework adapters: other evaluation frameworks' results as our records, our evaluators as their scorers.

Each adapter imports its framework, so nothing here is imported by ``import evalsi``; import the adapter itself
(``evalsi.adapters.inspect``) where the framework is installed. docs/adapters.md.
"""
