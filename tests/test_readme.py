"""The README's Python examples run as written (docs that tests check)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_python_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "experiments").symlink_to(README.parent / "experiments")
    namespace: dict = {}
    for block in BLOCKS[:index + 1]:  # later blocks may use names from earlier ones
        exec(compile(block, f"README.md[python {index}]", "exec"), namespace)
    if index == 0:
        result = namespace["result"]
        assert result.texts[0] == "用户最喜欢玩星露谷物语"
        assert "<untrusted_memories>" in result.to_prompt()
        namespace["store"].close()
