"""Text pack throughput embedded: record-evaluations per second of each metric through ``evalsi.evaluate(...)``
(records built from rows, the run planned and driven in this process, every record evaluated, results stored and
summarized), over sentence pairs like a translation or summarization test set's.

    .venv/bin/python benchmarks/pack_text.py [--records 20000] [--metrics bleu,rouge,...]

Prints one line per metric, ``metric  N rec/s  (target >= 20,000)`` (issue 16), with the CPU seconds and the load
average: the machine is shared. Dataset-scope metrics (corpus-bleu, corpus-chrf) count the records mapped and
reduced, bootstrap interval included. Each line also gives records per CPU-second of this process (steadier than
wall time on a loaded machine), the CPU microseconds of the evaluator's function alone and, for a metric with a
batch form (what the runner calls for a chunk of records), of that form alone; exact-match over the same rows
ends the list as the engine's own ceiling. The first call of each metric (imports, nltk's stemmer,
caches) is made on a few rows beforehand and not timed. ``bertscore`` (a transformer's forward pass, thousands of
times slower) is not in the default list: name it with ``--records 500``; its "batch" is ``bertscore_pairs`` (texts
encoded in batches of similar lengths) over the runner's chunks, which the runner itself does not call.
"""

from __future__ import annotations

import argparse
import os
import random
import time

import evalsi
from evalsi.evaluators import Registry
from evalsi.evaluators.runner import RunnerOptions
from evalsi.records import make_record
from evalsi.v1alpha1.record_pb2 import Record

TARGET_PER_S = 20_000
_CHUNK = RunnerOptions().chunk_size
METRICS = ("bleu", "corpus-bleu", "chrf", "corpus-chrf", "rouge", "meteor", "token-f1", "embedding-similarity")
# Words of a news-like English vocabulary, with inflections (so stems matter) and punctuation.
_VOCABULARY = [
    "the", "a", "of", "to", "in", "and", "for", "on", "with", "that", "is", "was", "were", "be", "by", "at", "from",
    "as", "it", "its", "has", "have", "had", "this", "which", "said", "government", "minister", "president", "city",
    "country", "people", "year", "years", "week", "report", "reports", "reported", "talks", "talk", "market",
    "markets", "price", "prices", "rose", "fell", "rising", "falling", "percent", "million", "billion", "company",
    "companies", "new", "officials", "official", "police", "court", "ruling", "ruled", "election", "elections",
    "vote", "voted", "voting", "party", "parties", "agreement", "agreed", "plan", "plans", "planned", "public",
    "health", "school", "schools", "water", "energy", "climate", "change", "changes"
]


def rows(count: int, seed: int = 0) -> list[dict[str, str]]:
    """``count`` rows: a reference of 12 to 30 words and an output sharing most of it, reworded and reordered a
    little, each pair different."""
    rng = random.Random(seed)
    out = []
    for index in range(count):
        reference = [rng.choice(_VOCABULARY) for _ in range(rng.randint(12, 30))]
        output = [w if rng.random() > 0.25 else rng.choice(_VOCABULARY) for w in reference]
        cut = rng.randint(0, len(output) // 4)
        output = output[cut:] + output[:cut]
        out.append({"id": f"r{index}", "output": " ".join(output).capitalize() + ".",
                    "reference": " ".join(reference).capitalize() + "."})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="rows evaluated per metric")
    parser.add_argument("--metrics", default=",".join(METRICS), help="comma-separated evaluators to time")
    args = parser.parse_args()
    print(f"{args.records} records per metric; load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"on {os.cpu_count()} CPUs")
    # Each timing gets rows of its own seed, so no figure rides on texts an earlier one left in a cache (13a's
    # tokenizations are memoized, as sacrebleu memoizes them).
    for index, metric in enumerate([*args.metrics.split(","), "exact-match"]):
        data = rows(args.records, seed=2 * index + 2)
        records = [make_record(output=row["output"], reference=row["reference"])
                   for row in rows(args.records, seed=2 * index + 3)]
        evalsi.evaluate(rows(50, seed=1), [metric])
        wall, cpu = time.perf_counter(), time.process_time()
        results = evalsi.evaluate(data, [metric])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        mean = next(iter(results.summaries.values())).mean
        print(f"{metric:<12} {args.records / wall:>9,.0f} rec/s  (target >= {TARGET_PER_S:,})  "
              f"{args.records / cpu:>9,.0f} rec/CPU-s  cpu {cpu:.2f} s  wall {wall:.2f} s  "
              f"alone {_alone_us(metric, records):.1f} us/rec{_batch_us(metric, records)}  mean {mean:.4f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}; exact-match (a batch form) is the engine's ceiling on the "
          "same rows; 'alone' is the evaluator's function (a dataset metric's mapper) called in a loop, 'batch' its "
          "batch form on chunks of 2,048 records as the runner calls it, CPU time")


def _batch_us(metric: str, records: list[Record]) -> str:
    """The CPU microseconds per record of the evaluator's batch form, if it has one, over the records' text columns
    in the runner's chunks (RunnerOptions.chunk_size), defaults bound; "" without one."""
    ev = Registry.from_entry_points().resolve(metric)
    if metric == "bertscore":
        return _bertscore_pairs_us(records)
    if ev.batch is None:
        return ""
    params = {p.name: p.default for p in ev.params if not p.required}
    columns = {name: [getattr(record, name).text for record in records] for name in ev.requires}
    started = time.process_time()
    for start in range(0, len(records), _CHUNK):
        ev.batch({name: column[start:start + _CHUNK] for name, column in columns.items()}, **params)
    return f"  batch {(time.process_time() - started) / len(records) * 1e6:.1f} us/rec"


def _bertscore_pairs_us(records: list[Record]) -> str:
    """BERTScore's batched path (``bertscore_pairs``: a chunk's distinct texts encoded together) per record."""
    from evalsi.packs.text.bertscore import bertscore_pairs

    outputs = [record.output.text for record in records]
    references = [[record.reference.text] for record in records]
    started = time.process_time()
    for start in range(0, len(records), _CHUNK):
        bertscore_pairs(outputs[start:start + _CHUNK], references[start:start + _CHUNK])
    return f"  batch {(time.process_time() - started) / len(records) * 1e6:.1f} us/rec"


def _alone_us(metric: str, records: list[Record]) -> float:
    """CPU microseconds per record of the evaluator's own function (a dataset metric's mapper), defaults bound."""
    ev = Registry.from_entry_points().resolve(metric)
    params = {p.name: p.default for p in ev.params if not p.required}
    call = ev.mapper if ev.mapper is not None else ev.fn
    started = time.process_time()
    for record in records:
        call(record, **params)
    return (time.process_time() - started) / len(records) * 1e6


if __name__ == "__main__":
    main()
