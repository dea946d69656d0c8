import json
import os

from calc import add

cases = [(1, 2, 3), (2, 2, 4), (-1, 1, 0)][: int(os.environ["EXPECTED_CASES"])]
failed = [c for c in cases if add(c[0], c[1]) != c[2]]
print(json.dumps({"success": not failed, "reason": f"{len(cases) - len(failed)}/{len(cases)} cases pass"}))
