"""Seed 001 §3.6's whitelist, `sql_select_only`, against a hostile corpus: every way we
know to smuggle a second statement, a write, a lock or a side effect past "it starts
with SELECT" is refused, and ordinary read-only queries (quotes, Chinese names, a final
`;`) pass. Some corpus entries are also run on a real SQLite database, to show that what
passes does not write."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pi_runtime import Agent, Guardrails, Limits, ToolResultMessage, tool
from pi_runtime.guardrails import (
    Allow,
    Deny,
    SqlSelectOnly,
    screen,
    select_problem,
    sql_select_only,
)
from pi_runtime.testing import ScriptedModel

READ_ONLY = [
    "SELECT 1",
    "select * from orders",
    "SELECT id, total FROM orders WHERE status = 'paid' ORDER BY total DESC LIMIT 5;",
    "SELECT * FROM orders;   \n\t",
    "  \n SELECT name FROM users WHERE name = 'O''Brien'",
    "SELECT 'a -- not a comment; DROP TABLE t' AS s",
    'SELECT "drop", "update" FROM audit',  # quoted names are names, not keywords
    "SELECT 城市, 温度 FROM 天气 WHERE 城市 = '北京'",
    "SELECT count(*) FROM t WHERE a IN (1, 2, 3) GROUP BY b HAVING count(*) > 1",
    "SELECT a FROM t UNION ALL SELECT b FROM u",
    "SELECT * FROM t WHERE created_at > $1 AND x = ?",
    "SELECT 1.5e3, .5, 0x1F",
    "SELECT lower(name) FROM users",
    "SELECT updated_at, deleted, created_by, inserted_rows FROM t",  # words *containing* verbs
    "SELECT * FROM t t1 JOIN u ON t1.id = u.id WHERE t1.note LIKE '%;%'",
    "SELECT\n  id\nFROM\n  t",
]

HOSTILE = {
    # not a SELECT at all
    "empty": "",
    "blank": "   \n\t ",
    "delete": "DELETE FROM users",
    "drop": "DROP TABLE users",
    "update": "UPDATE users SET admin = true",
    "insert": "INSERT INTO users VALUES (1)",
    "cte-delete": "WITH gone AS (DELETE FROM users RETURNING *) SELECT * FROM gone",
    "cte-plain": "WITH x AS (SELECT 1) SELECT * FROM x",
    "parenthesised": "(SELECT 1)",
    "explain-analyze": "EXPLAIN ANALYZE DELETE FROM users",
    "values": "VALUES (1)",
    "table": "TABLE users",
    "selected-word": "SELECTED * FROM t",
    "leading-comment": "/* hi */ SELECT 1",
    "leading-line-comment": "-- note\nSELECT 1",
    # a second statement
    "stacked": "SELECT 1; DROP TABLE users",
    "stacked-no-space": "SELECT 1;DROP TABLE users",
    "stacked-select": "SELECT 1; SELECT 2",
    "stacked-after-newline": "SELECT 1;\nDELETE FROM users",
    "two-semicolons": "SELECT 1;;",
    "stacked-after-string": "SELECT 'a'; DROP TABLE users; --'",
    "quote-closed-early": "SELECT 'it''s'; DELETE FROM t",
    # comments hiding text
    "line-comment": "SELECT 1 -- ; DROP TABLE users",
    "block-comment": "SELECT 1 /* ; DROP TABLE users */",
    "mysql-versioned": "SELECT 1 /*!50000 ; DROP TABLE users */",
    "hash-comment": "SELECT 1 # ; DROP TABLE users",
    "comment-splits-keyword": "SELECT 1 FROM t; DR/**/OP TABLE users",
    # dialect tricks with quoting
    "backslash-escape": "SELECT 'a\\'; DROP TABLE users; -- '",
    "e-string": "SELECT E'\\x41'",
    "dollar-quote": "SELECT $$; DROP TABLE users; $$",
    "dollar-tag": "SELECT $t$ x $t$",
    "unicode-escape-name": 'SELECT U&"pg\\0073leep"(5)',
    "unicode-escape-uescape": "SELECT U&\"pg!0073leep\" UESCAPE '!' (5)",
    "unclosed-quote": "SELECT 'abc",
    "unclosed-name": 'SELECT "abc',
    "backslash-outside": "SELECT 1 \\g DROP TABLE users",
    # writes and locks inside one SELECT
    "select-into": "SELECT * INTO stolen FROM users",
    "into-outfile": "SELECT * FROM users INTO OUTFILE '/tmp/u.csv'",
    "into-dumpfile": "SELECT x INTO DUMPFILE '/var/www/shell.php' FROM t",
    "for-update": "SELECT * FROM accounts FOR UPDATE",
    "for-share": "SELECT * FROM accounts FOR SHARE",
    "for-no-key-update": "SELECT * FROM accounts FOR NO KEY UPDATE",
    "for-key-share": "select * from accounts for key share",
    "subquery-delete": "SELECT * FROM (DELETE FROM t RETURNING *) AS d",
    "lowercase-drop": "select 1 from t where 1=1 union select drop from x",
    # side effects through functions
    "pg-sleep": "SELECT pg_sleep(10)",
    "pg-sleep-qualified": "SELECT pg_catalog.pg_sleep (10)",
    "pg-sleep-quoted": 'SELECT "pg_sleep"(10)',
    "pg-sleep-upper": "SELECT PG_SLEEP(10)",
    "pg-sleep-newline": "SELECT pg_sleep\n(10)",
    "mysql-sleep": "SELECT SLEEP(10)",
    "benchmark": "SELECT BENCHMARK(100000000, MD5('x'))",
    "read-file": "SELECT pg_read_file('/etc/passwd')",
    "lo-import": "SELECT lo_import('/etc/passwd')",
    "load-file": "SELECT LOAD_FILE('/etc/passwd')",
    "load-extension": "SELECT load_extension('/tmp/evil.so')",
    "dblink": "SELECT * FROM dblink('host=evil', 'DELETE FROM users') AS t(a int)",
    "query-to-xml": "SELECT query_to_xml('DELETE FROM users RETURNING *', true, true, '')",
    "set-config": "SELECT set_config('log_statement', 'none', false)",
    "nextval": "SELECT nextval('orders_id_seq')",
    "advisory-lock": "SELECT pg_advisory_lock(1)",
    "terminate": "SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
    "notify": "SELECT pg_notify('ch', 'payload')",
    "xp-cmdshell": "SELECT xp_cmdshell('whoami')",
    # characters that are not what they seem
    "nul": "SELECT 1\x00; DROP TABLE users",
    "no-break-space": "SELECT\u00a0*\u00a0FROM t",
    "fullwidth-semicolon": "SELECT 1；DROP TABLE users",
    "zero-width-space": "SELECT 1\u200b; DROP TABLE users",
    "line-separator": "SELECT 1\u2028DROP TABLE users",
    "control-char": "SELECT 1\x1b[2J",
    "too-long": "SELECT " + "1," * 60_000 + "1",
}


@pytest.mark.parametrize("sql", READ_ONLY)
def test_a_read_only_select_passes(sql: str) -> None:
    assert select_problem(sql) is None
    assert sql_select_only({"sql": sql}) == Allow()


@pytest.mark.parametrize("sql", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_sql_is_refused_with_a_reason(sql: str) -> None:
    problem = select_problem(sql)

    assert problem is not None
    verdict = sql_select_only({"sql": sql})
    assert isinstance(verdict, Deny) and verdict.reason == problem


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT 1; DROP TABLE users", "only one statement"),
        ("DELETE FROM users", "must start with SELECT"),
        ("SELECT 1 -- x", "comments"),
        ("SELECT * INTO t FROM u", "`INTO` is not allowed"),
        ("SELECT * FROM t FOR SHARE", "row locks (`FOR SHARE`)"),
        ("SELECT pg_sleep(1)", "the function `pg_sleep`"),
        ("SELECT $$x$$", "dollar quoting"),
        ("SELECT 'a\\'", "backslash"),
        ("SELECT\u00a01", "U+00A0"),
    ],
)
def test_the_reason_names_the_rule_broken(sql: str, words: str) -> None:
    assert words in (select_problem(sql) or "")


def test_what_passes_runs_on_sqlite_without_writing() -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    db.execute("INSERT INTO users VALUES (1, 'O''Brien')")
    for sql in ["SELECT * FROM users;", "SELECT name FROM users WHERE name = 'O''Brien'"]:
        assert select_problem(sql) is None
        db.execute(sql).fetchall()
    # sqlite3 would run only the first statement of these, but the whitelist refuses
    # them whole: a driver that runs scripts would run the second too
    for name in ("stacked", "stacked-no-space", "line-comment"):
        assert select_problem(HOSTILE[name]) is not None
    assert db.execute("SELECT count(*) FROM users").fetchone() == (1,)


def test_another_argument_name_is_checked_when_given() -> None:
    guard = SqlSelectOnly("query")

    assert guard({"query": "SELECT 1"}) == Allow()
    assert isinstance(guard({"query": "DROP TABLE t"}), Deny)
    assert guard.name == "sql_select_only[query]"


def test_a_string_is_checked_itself_so_it_also_guards_a_message() -> None:
    assert sql_select_only("SELECT 1") == Allow()
    assert isinstance(sql_select_only("DROP TABLE t"), Deny)


def test_sql_that_is_not_text_is_refused() -> None:
    assert sql_select_only({"sql": ["SELECT 1"]}) == Deny("`sql` must be SQL text")


def test_guarding_a_tool_without_the_argument_fails_closed() -> None:
    done = asyncio.run(screen([sql_select_only], {"query": "SELECT 1"}, stage="tool"))

    assert done.stopped is not None and done.stopped.verdict == "error"
    assert "no 'sql' to check" in done.stopped.reason


EXECUTED: list[str] = []


@tool
def run_sql(sql: str) -> list[Any]:
    """Run SQL on the reporting database."""
    EXECUTED.append(sql)
    return [[1]]


def test_an_agent_whose_sql_tool_is_guarded_never_runs_a_write() -> None:
    EXECUTED.clear()
    attempts = [HOSTILE[k] for k in ("stacked", "cte-delete", "pg-sleep-quoted", "line-comment")]
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "run_sql", "arguments": {"sql": sql}}]} for sql in attempts
    ]
    steps += [
        {"tool_calls": [{"name": "run_sql", "arguments": {"sql": "SELECT 1"}}]},
        {"text": "1"},
    ]
    agent = Agent(
        ScriptedModel(steps),
        tools=[run_sql],
        guardrails=Guardrails(tools={"run_sql": [sql_select_only]}),
        limits=Limits(max_consecutive_errors=5),
        trace_dir=False,
    )

    result = agent.run_sync("count the rows, then clean up")

    assert result.output == "1"
    assert EXECUTED == ["SELECT 1"]
    refusals = [m for m in result.messages if isinstance(m, ToolResultMessage) and m.is_error]
    assert len(refusals) == 4
    assert all(m.error is not None and m.error.kind == "permission_denied" for m in refusals)


FRAGMENTS = [
    "SELECT", "select", " ", "\n", "1", "a", "*", "FROM t", "WHERE a = 1", ",", "(", ")",
    ";", "'", "''", '"', "--", "/*", "*/", "#", "\\", "$$", "'a;b'", "'--'",
    "DROP TABLE t", "DELETE FROM t", "UPDATE t SET a = 2", "INSERT INTO t VALUES (9)",
    "CREATE TABLE u(a)", "ATTACH ':memory:' AS x", "PRAGMA user_version = 7", "VACUUM",
    "REPLACE INTO t VALUES (8)", "INTO", "UNION SELECT a FROM t",
    "[", "]", "`", "[x'", "']", "1INTO t",
]  # fmt: skip


@settings(suppress_health_check=[HealthCheck.filter_too_much])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=10))
def test_whatever_passes_changes_nothing_even_when_run_as_a_script(parts: list[str]) -> None:
    sql = "SELECT " + "".join(parts)
    assume(select_problem(sql) is None)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (a INTEGER)")
    db.execute("INSERT INTO t VALUES (1)")
    db.commit()
    before = db.total_changes
    with contextlib.suppress(sqlite3.Error):  # not valid SQL
        db.executescript(sql)  # runs every statement it holds, unlike execute
    assert db.total_changes == before
    assert db.execute("SELECT a FROM t").fetchall() == [(1,)]
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]
    assert db.execute("PRAGMA user_version").fetchone() == (0,)
    assert db.execute("PRAGMA database_list").fetchall()[1:] == []
