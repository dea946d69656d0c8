"""A record's objects read back with their keys in one order, whatever the process: protobuf's map iterates in an
order that changes between processes, so the same record printed (into a judge's prompt, a results file) differed."""

from __future__ import annotations

import json
import subprocess
import sys

from evalsi.records import from_value, struct_to_dict, to_value

DOCUMENT = {"zeta": 1, "alpha": {"k9": [{"z": 1, "b": 2, "a": 3}], "k1": None, "k5": "x"}, "mid": 2.5, "beta": True,
            "k6": [], "k5": {}}
PRINT = ("import json, sys; from evalsi.records import from_value, to_value; "
         "print(json.dumps(from_value(to_value(json.loads(sys.argv[1])))))")


def test_keys_come_back_sorted_at_every_depth() -> None:
    value = from_value(to_value(DOCUMENT))
    assert list(value) == sorted(DOCUMENT)
    assert list(value["alpha"]) == ["k1", "k5", "k9"]
    assert list(value["alpha"]["k9"][0]) == ["a", "b", "z"]
    assert value == DOCUMENT  # nothing but the order changed
    assert list(struct_to_dict(to_value(DOCUMENT).struct_value)) == sorted(DOCUMENT)


def test_every_process_prints_a_record_the_same() -> None:
    printed = {subprocess.run([sys.executable, "-c", PRINT, json.dumps(DOCUMENT)], capture_output=True, text=True,
                              check=True).stdout for _ in range(3)}
    assert printed == {json.dumps(from_value(to_value(DOCUMENT))) + "\n"}
