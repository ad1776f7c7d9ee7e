"""Report reading is bounded: a gzip bomb is stopped at the cap while it expands, and an
oversized file is refused before it is read (docs/bad-input.md, "Report files")."""

from __future__ import annotations

import tracemalloc
import zlib
from pathlib import Path

import pytest

from torchscan_stages import load_report

MIB = 2**20


def _bomb(path: Path, expanded_mib: int) -> int:
    """A gzip file of ``{"kind": "`` and spaces that expands to ``expanded_mib`` MiB."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    with path.open("wb") as handle:
        handle.write(deflate.compress(b'{"kind": "'))
        block = b" " * MIB
        for _ in range(expanded_mib):
            handle.write(deflate.compress(block))
        handle.write(deflate.flush())
    return path.stat().st_size


def test_a_400_mb_gzip_bomb_is_refused(tmp_path: Path) -> None:
    size = _bomb(tmp_path / "bomb.json.gz", 400)
    assert size < 1 * MIB  # about 400 KB on disk (spaces deflate about 1000:1)
    with pytest.raises(ValueError) as caught:
        load_report(tmp_path / "bomb.json.gz")
    message = str(caught.value)
    assert "bomb.json.gz: refused: its gzip data expands past 256 MiB" in message
    assert "\n" not in message


def test_the_bomb_is_stopped_while_it_expands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHSCAN_STAGES_MAX_REPORT_MB", "2")
    _bomb(tmp_path / "bomb.json.gz", 64)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="expands past 2 MiB"):
            load_report(tmp_path / "bomb.json.gz")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # at most the 2 MiB cap plus one 4 MiB chunk (and the bytearray's regrowth), never 64 MiB
    assert peak < 16 * MIB, peak


def test_an_oversized_plain_file_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHSCAN_STAGES_MAX_REPORT_MB", "1")
    path = tmp_path / "big.json"
    path.write_bytes(b'{"kind": "' + b" " * (2 * MIB) + b'"}')
    expected = r"big\.json: refused: the file's 2097164 bytes, over the report size limit of 1 MiB"
    with pytest.raises(ValueError, match=expected):
        load_report(path)


def test_a_truncated_gzip_is_still_damaged_data(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    _bomb(path, 1)
    path.write_bytes(path.read_bytes()[:-12])
    with pytest.raises(ValueError, match=r"t\.json\.gz: not a torchscan_stages report \(damaged"):
        load_report(path)
