"""Seed 001 §3.6's business-rule whitelist: the SQL a tool runs must be one SELECT.

    from pi_runtime.guardrails import sql_select_only      # checks the `sql` argument
    Agent(..., guardrails=Guardrails(tools={"run_sql": [sql_select_only]}))
    SqlSelectOnly("query")                                # or another argument's name

The text is read as hostile. It is lexed the way databases lex it (quoted text and
quoted names skipped, doubled quotes inside them), and refused when:

- the first word is not SELECT (so no WITH: a CTE may hold a DELETE);
- there is a second statement, or anything after a final `;`;
- it holds a comment (`--`, `/*`, `#`), which can hide text from a reader, or a
  backslash, dollar quoting (`$$`, `$tag$`) or Unicode-escaped names (`U&"…"`), whose
  meanings differ between databases;
- a word that writes or locks appears outside quotes (INSERT, UPDATE, DELETE, DROP, INTO,
  FOR SHARE, …), or a function known for side effects is called (`pg_sleep`,
  `pg_read_file`, `dblink`, `set_config`, `nextval`, `load_extension`, `query_to_xml`,
  which runs a query given as text, …);
- it holds a NUL, a control character, or a character outside quotes that is neither
  a letter, a digit nor SQL punctuation (a no-break space, a full-width `；`).

Databases disagree on what quotes a name: PostgreSQL only `"…"`, MySQL also `` `…` ``,
SQLite also `[…]` (ended by the first `]`), SQL Server `[…]` where `]]` is a `]`. Where
one reads a quoted name another reads code (`arr[1]` is a subscript in PostgreSQL, and a
`'` inside `[…]` opens text there), so the text is lexed once per reading and must pass
every one. A number ends where its digits do: PostgreSQL up to 14 reads `1INTO t` as
`1 INTO t`.

The functions are a deny list. Families are refused by their prefix (`lo_`,
`pg_stat_reset`, `pg_file_`, `pg_advisory_`, `dblink`, …): every member writes, locks or
reaches outside the query, and a member a later release adds is refused too.

This is one layer, not the wall: a function defined in the database can do anything
and no text check sees it. Run such tools on a read-only role or connection.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .verdicts import Allow, Deny

MAX_SQL_CHARS = 100_000

WRITE_WORDS = frozenset(
    {
        "INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "DROP", "ALTER", "CREATE",
        "TRUNCATE", "GRANT", "REVOKE", "ATTACH", "DETACH", "PRAGMA", "VACUUM", "COPY",
        "CALL", "EXEC", "EXECUTE", "INTO", "OUTFILE", "DUMPFILE", "LOCK",
        # SQL Server needs no `;` between statements: `SELECT 1 WAITFOR DELAY '1:00'`
        "WAITFOR", "SHUTDOWN", "KILL", "DBCC", "RECONFIGURE", "DENY", "BACKUP", "RESTORE",
    }
)  # fmt: skip
"""Words that write, lock or run other statements; none belongs in a read-only SELECT."""

LOCK_AFTER_FOR = frozenset({"UPDATE", "SHARE", "NO", "KEY"})
"""`FOR UPDATE`, `FOR SHARE`, `FOR NO KEY UPDATE`, `FOR KEY SHARE`: row locks."""

SIDE_EFFECT_FUNCTIONS = frozenset(
    {
        # waiting (a denial of service)
        "sleep", "benchmark",
        # files and large objects
        "pg_stat_file", "lowrite", "load_file", "load_extension", "readfile", "writefile", "edit",
        # a query given as text, or run on another server
        "openrowset", "openquery", "opendatasource",
        "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema", "cursor_to_xml",
        # settings, sequences, transaction ids, locks
        "set_config", "nextval", "setval", "txid_current", "pg_current_xact_id",
        "pg_notify", "get_lock", "release_lock", "release_all_locks",
        # the server itself
        "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile",
        "pg_promote", "pg_switch_wal", "pg_switch_xlog", "pg_start_backup", "pg_stop_backup",
        "pg_import_system_collations", "pg_log_backend_memory_contexts",
        "fts3_tokenizer", "xp_cmdshell", "sys_exec", "sys_eval",
    }
)  # fmt: skip
"""Functions that write, lock, wait or reach outside the query, by their whole name."""

SIDE_EFFECT_PREFIXES = (
    "pg_sleep", "pg_read_", "pg_ls_", "pg_file_", "lo_",
    "dblink", "pg_advisory_", "pg_try_advisory_", "pg_stat_reset",
    "pg_create_", "pg_drop_", "pg_copy_", "pg_replication_", "pg_logical_",
    "pg_backup_", "pg_wal_replay_",
)  # fmt: skip
"""Families refused whole: files and large objects, other connections, advisory locks,
statistics resets, replication slots and origins, backups and WAL replay."""

_SPACE = frozenset(" \t\r\n\f")
_QUOTES = frozenset("'\"`")


@dataclass(frozen=True, slots=True)
class _Reading:
    """How one family of databases quotes names (text is `'…'` in all of them)."""

    label: str
    name_quotes: str
    brackets_double: bool = False  # `]]` inside `[…]` is a `]`, not the end


_READINGS = (
    _Reading("PostgreSQL", '"'),
    _Reading("MySQL", '"`'),
    _Reading("SQLite", '"`['),
    _Reading("SQL Server", '"[', brackets_double=True),
)


def select_problem(sql: str) -> str | None:
    """Why `sql` is not one read-only SELECT statement; None when it is."""
    if not sql.strip():
        return "the SQL is empty"
    if len(sql) > MAX_SQL_CHARS:
        return f"the SQL is longer than {MAX_SQL_CHARS} characters"
    if "\x00" in sql:
        return "the SQL holds a NUL character"
    for reading in _READINGS:
        problem = _problem_when_read(sql, reading)
        if problem is not None:
            if reading is _READINGS[0]:
                return problem
            return f"{problem} (read as {reading.label} reads it)"
    return None


def _problem_when_read(sql: str, reading: _Reading) -> str | None:
    """Why `sql`, lexed with `reading`'s quoted names, is not one read-only SELECT."""
    lexed = _lex(sql, reading)
    if isinstance(lexed, str):
        return lexed
    first, words, calls = lexed
    if first != "SELECT":
        return "the SQL must start with SELECT (one read-only query)"
    for word in words:
        if word in WRITE_WORDS:
            return f"`{word}` is not allowed: the query must only read"
    for word, after in itertools.pairwise(words):
        if word == "FOR" and after in LOCK_AFTER_FOR:
            return f"row locks (`FOR {after}`) are not allowed"
    for name in calls:
        if name in SIDE_EFFECT_FUNCTIONS or name.startswith(SIDE_EFFECT_PREFIXES):
            return f"the function `{name}` is not allowed: it has side effects"
    return None


def _lex(sql: str, reading: _Reading) -> str | tuple[str | None, list[str], list[str]]:
    """(first token, words outside quotes upper-cased, names called as functions), or the
    problem met on the way."""
    n = len(sql)
    i = 0
    first: str | None = None
    first_at = -1
    words: list[str] = []
    calls: list[str] = []
    name: str | None = None  # the name just read, if the last token was one
    ended = False  # a `;` was read: only whitespace may follow
    while i < n:
        ch = sql[i]
        nxt = sql[i + 1] if i + 1 < n else ""
        if ch in _SPACE:
            i += 1
            continue
        if ended:
            return "only one statement is allowed: there is text after `;`"
        if first is None:
            first, first_at = ch, i
        if ch == ";":
            ended = True
            i += 1
            continue
        if ch == "'" or ch in reading.name_quotes:
            quoted = _quoted(sql, i, reading)
            if isinstance(quoted, str):
                return quoted
            # a quoted name can be called as a function ("pg_sleep"(1)): keep it as a name
            i, name = quoted
            continue
        problem = _forbidden_mark(ch, nxt)
        if problem is not None:
            return problem
        if ch.isalpha() or ch == "_":
            start = i
            while i < n and (sql[i].isalnum() or sql[i] in "_$"):
                i += 1
            word = sql[start:i]
            if start == first_at:
                first = word.upper()
            words.append(word.upper())
            name = word.lower()
            continue
        if ch.isdigit() or (ch == "." and nxt.isdigit()):
            i = _number_end(sql, i)
            name = None
            continue
        if ch == "$":
            if not nxt.isdigit():
                return "dollar quoting (`$$`, `$tag$`) is not allowed"
            i += 1
            while i < n and sql[i].isdigit():  # a parameter: $1
                i += 1
            name = None
            continue
        if ch == "(" and name is not None:
            calls.append(name)
        if ord(ch) < 32 or ord(ch) == 127:
            return f"the SQL holds a control character (U+{ord(ch):04X})"
        if ord(ch) > 127:
            return f"the character U+{ord(ch):04X} is not allowed outside quoted text"
        name = None
        i += 1
    return first, words, calls


def _forbidden_mark(ch: str, nxt: str) -> str | None:
    if (ch, nxt) in (("-", "-"), ("/", "*")) or ch == "#":
        return f"comments (`{ch}{nxt if ch != '#' else ''}`) are not allowed: they can hide text"
    if ch == "\\":
        return "a backslash is not allowed outside quoted text"
    if ch == "&" and nxt in _QUOTES:
        return "Unicode-escaped text or names (`U&'…'`) are not allowed"
    return None


def _quoted(sql: str, start: int, reading: _Reading) -> str | tuple[int, str | None]:
    """(the index after the quoted text or name opening at `start`, the name it spells or
    None for text), or the problem met."""
    opening = sql[start]
    closing = "]" if opening == "[" else opening
    doubled = opening != "[" or reading.brackets_double
    end = _closing(sql, start + 1, closing, doubled=doubled)
    if end < 0:
        return "a quoted text or name is not closed"
    inner = sql[start + 1 : end - 1]
    if "\\" in inner:
        return "quoted text holds a backslash, whose meaning differs between databases"
    if opening == "'":
        return end, None
    return end, (inner.replace(closing * 2, closing) if doubled else inner).lower()


def _closing(sql: str, i: int, quote: str, *, doubled: bool) -> int:
    """The index after the first `quote` from `i` on (with `doubled`, a doubled quote is
    part of the text), or -1 when there is none."""
    n = len(sql)
    while i < n:
        if sql[i] == quote:
            if doubled and i + 1 < n and sql[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    return -1


def _number_end(sql: str, i: int) -> int:
    """The index after the number at `i`: digits, a fraction, an exponent. What follows is
    lexed anew, so a word glued to a number (`1INTO t`) is still a word."""
    i = _digits_end(sql, i)
    if sql.startswith(".", i):
        i = _digits_end(sql, i + 1)
    if i < len(sql) and sql[i] in "eE":
        j = i + 2 if sql[i + 1 : i + 2] in ("+", "-") else i + 1
        if j < len(sql) and sql[j].isdigit():
            i = _digits_end(sql, j)
    return i


def _digits_end(sql: str, i: int) -> int:
    """The index after the digits (and `_` separators) from `i` on."""
    while i < len(sql) and (sql[i].isdigit() or sql[i] == "_"):
        i += 1
    return i


class SqlSelectOnly:
    """A guardrail that lets through one read-only SELECT and nothing else.

    Args:
        argument: the tool argument holding the SQL. Given a string instead of an
            arguments object (an input guardrail), it checks the string itself.
    """

    def __init__(self, argument: str = "sql") -> None:
        self.argument = argument
        self.name = "sql_select_only" if argument == "sql" else f"sql_select_only[{argument}]"

    def __repr__(self) -> str:
        return f"SqlSelectOnly({self.argument!r})"

    def __call__(self, value: Any) -> Allow | Deny:
        if isinstance(value, Mapping):
            if self.argument not in value:
                # the guardrail guards the wrong tool: fail closed, loudly
                raise ValueError(f"the arguments have no {self.argument!r} to check")
            value = value[self.argument]
        if not isinstance(value, str):
            return Deny(f"`{self.argument}` must be SQL text")
        problem = select_problem(value)
        return Allow() if problem is None else Deny(problem)


sql_select_only = SqlSelectOnly()
"""Checks the `sql` argument of a tool call (or a string given alone)."""
