from pathlib import Path


def test_sum_is_right():
    assert Path("/app/sum.txt").read_text().strip() == "27"
