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

This is one layer, not the wall: a function defined in the database can do anything
and no text check sees it. Run such tools on a read-only role or connection.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from .verdicts import Allow, Deny

MAX_SQL_CHARS = 100_000

WRITE_WORDS = frozenset(
    {
        "INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "DROP", "ALTER", "CREATE",
        "TRUNCATE", "GRANT", "REVOKE", "ATTACH", "DETACH", "PRAGMA", "VACUUM", "COPY",
        "CALL", "EXEC", "EXECUTE", "INTO", "OUTFILE", "DUMPFILE", "LOCK",
    }
)  # fmt: skip
"""Words that write, lock or run other statements; none belongs in a read-only SELECT."""

LOCK_AFTER_FOR = frozenset({"UPDATE", "SHARE", "NO", "KEY"})
"""`FOR UPDATE`, `FOR SHARE`, `FOR NO KEY UPDATE`, `FOR KEY SHARE`: row locks."""

SIDE_EFFECT_FUNCTIONS = frozenset(
    {
        # waiting (a denial of service)
        "pg_sleep", "pg_sleep_for", "pg_sleep_until", "sleep", "benchmark",
        # files and large objects
        "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_stat_file",
        "lo_import", "lo_export", "lo_unlink", "lo_create", "lo_from_bytea", "lo_put",
        "load_file", "load_extension", "readfile", "writefile", "edit",
        # other connections, or a query given as text
        "dblink", "dblink_exec", "dblink_send_query", "dblink_connect",
        "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema", "cursor_to_xml",
        # settings, sequences, locks, the server itself
        "set_config", "nextval", "setval", "pg_advisory_lock", "pg_advisory_xact_lock",
        "pg_try_advisory_lock", "pg_try_advisory_xact_lock", "pg_notify",
        "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile",
        "pg_switch_wal", "pg_create_restore_point", "pg_logical_emit_message",
        "fts3_tokenizer", "xp_cmdshell", "sys_exec", "sys_eval",
    }
)  # fmt: skip

_SPACE = frozenset(" \t\r\n\f")
_QUOTES = frozenset("'\"`")


def select_problem(sql: str) -> str | None:
    """Why `sql` is not one read-only SELECT statement; None when it is."""
    if not sql.strip():
        return "the SQL is empty"
    if len(sql) > MAX_SQL_CHARS:
        return f"the SQL is longer than {MAX_SQL_CHARS} characters"
    if "\x00" in sql:
        return "the SQL holds a NUL character"
    lexed = _lex(sql)
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
        if name in SIDE_EFFECT_FUNCTIONS:
            return f"the function `{name}` is not allowed: it has side effects"
    return None


def _lex(sql: str) -> str | tuple[str | None, list[str], list[str]]:
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
        if ch in _QUOTES:
            end = _closing(sql, i)
            if end < 0:
                return "a quoted text or name is not closed"
            inner = sql[i + 1 : end - 1]
            if "\\" in inner:
                return "quoted text holds a backslash, whose meaning differs between databases"
            # a quoted name can be called as a function ("pg_sleep"(1)): keep it as a name
            name = None if ch == "'" else inner.replace(ch + ch, ch).lower()
            i = end
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
            while i < n and (sql[i].isalnum() or sql[i] in "._"):
                i += 1
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


def _closing(sql: str, start: int) -> int:
    """The index after the quote closing the one at `start` (doubled quotes are part of
    the text), or -1 when it is never closed."""
    quote = sql[start]
    i = start + 1
    n = len(sql)
    while i < n:
        if sql[i] == quote:
            if i + 1 < n and sql[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    return -1


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
