"""memlab.files.write_atomic: whole or not at all."""

import pytest

from memlab.files import write_atomic


def test_a_write_replaces_the_file_whole(tmp_path):
    p = tmp_path / "a.md"
    p.write_text("旧的\n", encoding="utf-8")
    write_atomic(p, "新的 new\r\nline")
    assert p.read_bytes() == "新的 new\r\nline".encode("utf-8")    # line ends kept as given
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.md"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    p = tmp_path / "a.md"
    p.write_text("old\n", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(p, "half \ud800 written")      # a lone surrogate cannot be encoded
    assert p.read_text(encoding="utf-8") == "old\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.md"]
