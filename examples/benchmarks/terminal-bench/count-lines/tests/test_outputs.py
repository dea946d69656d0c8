from pathlib import Path


def test_count_file_exists():
    assert Path("/app/count.txt").exists(), "/app/count.txt is missing"


def test_count_is_right():
    assert Path("/app/count.txt").read_text().strip() == "3"
