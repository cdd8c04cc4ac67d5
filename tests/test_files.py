"""memlab.files: write_atomic (whole or not at all); safe_name and unique_names (a name every
file system takes, distinct ignoring case)."""

import hashlib

import pytest

from memlab.files import MAX_NAME, safe_name, unique_names, write_atomic


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


@pytest.mark.parametrize("name, safe", [
    ("tuned/locomo", "tuned-locomo"), ("reverie+writer", "reverie+writer"),
    ('a\\b:c*d?e"f<g>h|i', "a-b-c-d-e-f-g-h-i"), ("a//\\b", "a-b"), ("tab\there", "tab-here"),
    ("../etc", "etc"), ("..", "_"), ("", "_"), (" .hidden. ", "hidden"), ("/abs", "abs"),
    ("CON", "CON_"), ("nul.txt", "nul.txt_"), ("lpt9", "lpt9_"), ("console", "console"),
    ("记忆/调优 v2", "记忆-调优 v2"), ("e\u0301t\u00e9", "\u00e9t\u00e9"),   # NFC: one form of é
])
def test_safe_name(name, safe, tmp_path):
    assert safe_name(name) == safe
    (tmp_path / safe).mkdir()                                 # a real folder, one level down
    assert [p.name for p in tmp_path.iterdir()] == [safe]


def test_a_long_name_keeps_its_start_and_a_hash_of_the_whole():
    name = "x" * 200
    got = safe_name(name)
    assert len(got) == MAX_NAME and got.startswith("x" * 50)
    assert got.endswith("-" + hashlib.sha256(name.encode()).hexdigest()[:8])
    assert safe_name("x" * 199) != got and safe_name("x" * MAX_NAME) == "x" * MAX_NAME


def test_unique_names_number_collisions_in_order_ignoring_case():
    got = unique_names(["a/b", "a-b", "A:B", "a-b-2", "c", "c"], reserved=["VRAM"])
    assert got == {"a/b": "a-b", "a-b": "a-b-2", "A:B": "A-B-3", "a-b-2": "a-b-2-2", "c": "c"}
    assert unique_names(["vram", "Vram"], reserved=["vram"]) == {"vram": "vram-2",
                                                                 "Vram": "Vram-3"}
