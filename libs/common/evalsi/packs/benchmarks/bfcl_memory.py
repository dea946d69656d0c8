"""BFCL's memory backends, native: ``MemoryAPI_kv`` and ``MemoryAPI_rec_sum`` (bfcl-eval 2026.3.23's
``func_source_code/memory_kv.py`` and ``memory_rec_sum.py``, method for method: public methods, signatures, return
values and error texts), with the shared behaviour of their base ``memory_api_metaclass.MemoryAPI``.

What BFCL keeps on disk is a value here. BFCL's ``_load_scenario(initial_config)`` reads the scenario's latest
snapshot file (``<scenario>_final.json`` under the model's result directory, none for the first prerequisite
conversation) and ``_flush_memory_to_local_file`` writes it after each prerequisite conversation. Here
``_load_scenario`` takes that snapshot itself (``{"core_memory", "archival_memory"}`` or ``{"memory"}``; ``{}`` for
a clean start) and :meth:`_snapshot` returns what BFCL would write, so the driver
(``evalsi.datasets.bfcl_memory_drive``) carries the memory from conversation to conversation without files.

``MemoryAPI_kv``'s key search ranks with BM25+ (``rank_bm25.BM25Plus``, its defaults k1=1.5, b=0.75, delta=1):
:class:`BM25Plus` is that algorithm with the same float operations in the same order, so the scores are equal.
The third backend, ``MemoryAPI_vector``, is ``bfcl_memory_vector``'s.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from copy import deepcopy
from typing import Any

# memory_kv.py's limits (https://lilianweng.github.io/posts/2023-06-23-agent/#component-two-memory)
MAX_CORE_MEMORY_SIZE = 7
MAX_CORE_MEMORY_ENTRY_LENGTH = 300
MAX_ARCHIVAL_MEMORY_SIZE = 50
MAX_ARCHIVAL_MEMORY_ENTRY_LENGTH = 2000
MAX_MEMORY_ENTRY_LENGTH = 10000  # memory_rec_sum.py's
_KEY_FORMAT = re.compile(r"^[a-z]+(_[a-z0-9]+)*$")


class BM25Plus:
    """``rank_bm25.BM25Plus`` over a tokenized corpus: its document frequencies, idf ``log((N + 1) / df)`` and
    ``get_scores`` (a list of floats where rank_bm25 returns a numpy array of the same values). An empty corpus
    raises ``ZeroDivisionError`` as rank_bm25's average document length does."""

    def __init__(self, corpus: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75, delta: float = 1) -> None:
        self.k1, self.b, self.delta = k1, b, delta
        self.doc_len: list[int] = []
        self.doc_freqs: list[dict[str, int]] = []
        documents_with: dict[str, int] = {}
        total = 0
        for document in corpus:
            self.doc_len.append(len(document))
            total += len(document)
            frequencies: dict[str, int] = {}
            for word in document:
                frequencies[word] = frequencies.get(word, 0) + 1
            self.doc_freqs.append(frequencies)
            for word in frequencies:
                documents_with[word] = documents_with.get(word, 0) + 1
        self.corpus_size = len(self.doc_len)
        self.avgdl = total / self.corpus_size
        self.idf = {word: math.log((self.corpus_size + 1) / freq) for word, freq in documents_with.items()}

    def get_scores(self, query: Sequence[str]) -> list[float]:
        scores = [0.0] * self.corpus_size
        for word in query:
            idf = self.idf.get(word) or 0
            for index, (frequencies, length) in enumerate(zip(self.doc_freqs, self.doc_len, strict=True)):
                freq = frequencies.get(word) or 0
                # numpy's element-wise operations, in its order: b * doc_len / avgdl, then 1 - b + that
                scores[index] += idf * (self.delta + (freq * (self.k1 + 1)) /
                                        (self.k1 * (1 - self.b + self.b * length / self.avgdl) + freq))
        return scores


class MemoryAPI:
    """The base's shared behaviour: a memory loaded from the scenario's snapshot, written back as one, and shown
    to the model in its system prompt (``_dump_core_memory_to_context``)."""

    def _load_scenario(self, initial_config: dict[str, Any], long_context: bool = False) -> None:
        raise NotImplementedError

    def _snapshot(self) -> dict[str, Any]:
        raise NotImplementedError

    def _dump_core_memory_to_context(self) -> str:
        raise NotImplementedError


class MemoryAPI_kv(MemoryAPI):  # BFCL's class name, which its questions' involved_classes say
    """Key-value memory: a small core memory always shown to the model and a larger archival memory."""

    def __init__(self) -> None:
        self.core_memory: dict[str, str] = {}
        self.archival_memory: dict[str, str] = {}
        self._api_description = ("This tool belongs to the memory suite, which provides APIs to interact with a "
                                 "key-value based memory system.")

    def _load_scenario(self, initial_config: dict[str, Any], long_context: bool = False) -> None:
        if initial_config:  # BFCL loads a snapshot only when there is one (not for the first conversation)
            self.core_memory = deepcopy(initial_config["core_memory"])
            self.archival_memory = deepcopy(initial_config["archival_memory"])

    def _snapshot(self) -> dict[str, Any]:
        return deepcopy({"core_memory": self.core_memory, "archival_memory": self.archival_memory})

    def _dump_core_memory_to_context(self) -> str:
        if not self.core_memory:
            return "There is no content in the core memory at this point."
        return json.dumps(self.core_memory, indent=4)

    @staticmethod
    def _similarity_search(query: str, corpus: list[str], k: int = 5) -> dict[str, Any]:
        tokenized_corpus = [text.replace("_", " ").lower().split() for text in corpus]
        bm25 = BM25Plus(tokenized_corpus)
        scores = bm25.get_scores(query.replace("_", " ").lower().split())
        ranked = sorted(zip(scores, corpus, strict=True), key=lambda pair: pair[0], reverse=True)
        return {"ranked_results": ranked[:k]}

    @staticmethod
    def _is_valid_key_format(s: str) -> bool:
        return bool(_KEY_FORMAT.match(s))

    def _add(self, memory: dict[str, str], key: Any, value: Any, size: int, length: int, full: str,
             added: str) -> dict[str, str]:
        key, value = str(key), str(value)
        if len(memory) >= size:
            return {"error": full}
        if len(value) > length:
            return {"error": f"Entry is too long. Please shorten the entry to less than {length} characters."}
        if not self._is_valid_key_format(key):
            return {"error": "Key must be in snake_case format and cannot contain spaces."}
        if key in memory:
            return {"error": "Key name must be unique."}
        memory[key] = value
        return {"status": added}

    @staticmethod
    def _replace(memory: dict[str, str], key: Any, value: Any, length: int) -> dict[str, str]:
        key, value = str(key), str(value)
        if key not in memory:
            return {"error": "Key not found."}
        if len(value) > length:
            return {"error": f"Entry is too long. Please shorten the entry to less than {length} characters."}
        memory[key] = value
        return {"status": "Key replaced."}

    @staticmethod
    def _remove(memory: dict[str, str], key: str) -> dict[str, str]:
        if key in memory:
            del memory[key]
            return {"status": "Key removed."}
        return {"error": "Key not found."}

    @staticmethod
    def _retrieve(memory: dict[str, str], key: str) -> dict[str, str]:
        if key not in memory:
            return {"error": "Key not found."}
        return {"value": memory[key]}

    def core_memory_add(self, key: str, value: str) -> dict[str, str]:
        return self._add(self.core_memory, key, value, MAX_CORE_MEMORY_SIZE, MAX_CORE_MEMORY_ENTRY_LENGTH,
                         "Core memory is full. Please clear some entries.", "Key-value pair added.")

    def core_memory_remove(self, key: str) -> dict[str, str]:
        return self._remove(self.core_memory, key)

    def core_memory_replace(self, key: str, value: str) -> dict[str, str]:
        return self._replace(self.core_memory, key, value, MAX_CORE_MEMORY_ENTRY_LENGTH)

    def core_memory_clear(self) -> dict[str, str]:
        self.core_memory = {}
        return {"status": "Short term memory cleared."}

    def core_memory_retrieve(self, key: str) -> dict[str, str]:
        return self._retrieve(self.core_memory, key)

    def core_memory_list_keys(self) -> dict[str, list[str]]:
        return {"keys": list(self.core_memory.keys())}

    def core_memory_key_search(self, query: str, k: int = 5) -> dict[str, Any]:
        return self._similarity_search(query, list(self.core_memory.keys()), k)

    def core_memory_retrieve_all(self) -> dict[str, str]:
        return self.core_memory

    def archival_memory_add(self, key: str, value: str) -> dict[str, str]:
        return self._add(self.archival_memory, key, value, MAX_ARCHIVAL_MEMORY_SIZE, MAX_ARCHIVAL_MEMORY_ENTRY_LENGTH,
                         "Long term memory is full. Please clear some entries.", "Key added.")

    def archival_memory_remove(self, key: str) -> dict[str, str]:
        return self._remove(self.archival_memory, key)

    def archival_memory_replace(self, key: str, value: str) -> dict[str, str]:
        return self._replace(self.archival_memory, key, value, MAX_ARCHIVAL_MEMORY_ENTRY_LENGTH)

    def archival_memory_clear(self) -> dict[str, str]:
        self.archival_memory = {}
        return {"status": "Long term memory cleared."}

    def archival_memory_retrieve(self, key: str) -> dict[str, str]:
        return self._retrieve(self.archival_memory, key)

    def archival_memory_list_keys(self) -> dict[str, list[str]]:
        return {"keys": list(self.archival_memory.keys())}

    def archival_memory_key_search(self, query: str, k: int = 5) -> dict[str, Any]:
        return self._similarity_search(query, list(self.archival_memory.keys()), k)


class MemoryAPI_rec_sum(MemoryAPI):  # BFCL's class name
    """Recursive summarization: one text the model appends to, rewrites and replaces parts of."""

    def __init__(self) -> None:
        self.memory = ""
        self._api_description = ("This tool belongs to the memory suite, which provides APIs to manage memory data "
                                 "via recursive summarization.")

    def _load_scenario(self, initial_config: dict[str, Any], long_context: bool = False) -> None:
        if initial_config:
            memory = deepcopy(initial_config["memory"])
            if not isinstance(memory, str):  # BFCL asserts it
                raise ValueError(f"Memory data should be a string, but got {type(memory)} instead.")
            self.memory = memory

    def _snapshot(self) -> dict[str, Any]:
        return {"memory": self.memory}

    def _dump_core_memory_to_context(self) -> str:
        if not self.memory:
            return "There is no content in the memory at this point."
        return str(self.memory)

    def memory_append(self, text: str) -> dict[str, str]:
        text = str(text)
        if len(self.memory + text) > MAX_MEMORY_ENTRY_LENGTH:
            return {"error": "Entry will be too long after appending. Please shorten the entry to less than "
                             f"{MAX_MEMORY_ENTRY_LENGTH} characters."}
        self.memory += text
        return {"status": "Memory appended."}

    def memory_update(self, text: str) -> dict[str, str]:
        text = str(text)
        if len(text) > MAX_MEMORY_ENTRY_LENGTH:
            return {"error": "Entry will be too long after updating. Please shorten the entry to less than "
                             f"{MAX_MEMORY_ENTRY_LENGTH} characters."}
        self.memory = text
        return {"status": "Memory updated."}

    def memory_clear(self) -> dict[str, str]:
        self.memory = ""
        return {"status": "Short term memory cleared."}

    def memory_replace(self, old_text: str, new_text: str) -> dict[str, str]:
        old_text, new_text = str(old_text), str(new_text)
        if old_text not in self.memory:
            return {"error": f"Text '{old_text}' not found in memory."}
        if len(new_text) > MAX_MEMORY_ENTRY_LENGTH:
            return {"error": "Entry will be too long after replacing. Please shorten the entry to less than "
                             f"{MAX_MEMORY_ENTRY_LENGTH} characters."}
        self.memory = self.memory.replace(old_text, new_text)
        return {"status": "Memory updated."}

    def memory_retrieve(self) -> dict[str, str]:
        if not self.memory:
            return {"error": "Memory is empty."}
        return {"memory_content": self.memory}


MEMORY_CLASSES: dict[str, type[MemoryAPI]] = {"MemoryAPI_kv": MemoryAPI_kv, "MemoryAPI_rec_sum": MemoryAPI_rec_sum}
