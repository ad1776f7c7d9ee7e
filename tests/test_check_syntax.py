"""`.ci/check_syntax` (run by `make lint`) names every JSON/YAML file that does not parse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "check_syntax"


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, check=False
    )


def test_bad_json_and_yaml_are_named_and_fail(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "good.json").write_text('{"a": [1, 2]}')
    (tmp_path / "good.yaml").write_text("stages:\n  a: {cmd: x}\n")
    (tmp_path / "bad.json").write_text('{"a": [1, 2],}')  # trailing comma
    (tmp_path / "bad.yml").write_text("a: [1, 2\n")  # unclosed flow sequence
    (tmp_path / ".gitignore").write_text("ignored.json\n")
    (tmp_path / "ignored.json").write_text("{")  # ignored by git: not checked
    result = _run(tmp_path)
    assert result.returncode == 1
    bad = sorted(line.split(":")[0] for line in result.stderr.splitlines())
    assert bad == [str(tmp_path / "bad.json"), str(tmp_path / "bad.yml")]
    assert "4 JSON/YAML files, 2 bad" in result.stdout  # good.json, good.yaml + the two bad


def test_the_checkout_parses() -> None:
    result = _run(SCRIPT.parents[1])
    assert result.returncode == 0, result.stderr
