from pathlib import Path

count = Path("/app/count.txt")
assert count.exists(), "/app/count.txt is missing"
assert count.read_text().strip() == "3", f"/app/count.txt holds {count.read_text().strip()!r}, expected 3"
print("count-lines: ok")
