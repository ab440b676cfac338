"""`sql_select_only` against text that databases lex differently: a `[…]` name (SQLite,
SQL Server), a backtick (a quote in MySQL and SQLite, an operator character in
PostgreSQL), a number glued to a word, a SQL Server statement that needs no `;`, and
PostgreSQL functions that write although they are called from a SELECT."""

from __future__ import annotations

import sqlite3

import pytest

from pi_runtime.guardrails import Deny, select_problem, sql_select_only

HIDDEN_BY_LEXING = {
    "bracket-hides-delete": "SELECT 1 AS [x'];DELETE FROM orders;SELECT 1 AS [']",
    "bracket-hides-drop": "SELECT 1 AS [a'];DROP TABLE orders;SELECT 1 AS [']",
    "bracket-hides-call": "SELECT 1 AS [a'], load_extension('/tmp/x.so') AS [']",
    "bracket-hides-quote-name": 'SELECT 1 AS [x"];DELETE FROM orders;SELECT 1 AS ["]',
    "bracket-hides-backtick": "SELECT 1 AS [x`];DELETE FROM orders;SELECT 1 AS [`]",
    "mssql-escaped-bracket": "SELECT [a]];DELETE FROM orders;[b] FROM t",
    "sqlite-first-bracket": "SELECT [a]]];DELETE FROM orders;SELECT [b]",
    "backtick-is-not-a-quote-in-postgresql": "SELECT `'`, 1;DELETE FROM orders;SELECT `'`",
    "backtick-hides-delete": "SELECT `x'`;DELETE FROM orders;SELECT 1 AS `'`",
    "subscript-hides-call": "SELECT arr[pg_sleep(10)::int] FROM t",
    "number-glued-to-into": "SELECT 1INTO evil FROM orders",
    "exponent-glued-to-into": "SELECT 1e3INTO evil FROM orders",
    "decimal-glued-to-into": "SELECT 1.5INTO evil FROM orders",
    "number-glued-to-call": "SELECT 1pg_sleep(10)",
    "mssql-waitfor-without-semicolon": "SELECT 1 WAITFOR DELAY '00:10:00'",
    "mssql-shutdown-without-semicolon": "SELECT 1 SHUTDOWN WITH NOWAIT",
    "mssql-openrowset": "SELECT * FROM OPENROWSET('SQLNCLI', 'Server=x;', 'SELECT 1')",
}

STILL_READ_ONLY = [
    "SELECT arr[1] FROM t",
    "SELECT arr[1:2], arr[i + 1] FROM t",
    "SELECT data['name'] FROM t",  # PostgreSQL 14 jsonb subscripts
    "SELECT 'a[' || x FROM t",
    "SELECT 'x]' || y || '[' FROM t",
    "SELECT [order], [group by] FROM [my table]",
    "SELECT `order` FROM `my table`",
    'SELECT "a[" FROM t',
    "SELECT a[b[1]], c[1] FROM t",
    "SELECT 1.5e3, .5, 0x1F, 1e-5, 2E+3, 1_000",
    "SELECT id FROM t LIMIT 10",
]


@pytest.mark.parametrize("sql", list(HIDDEN_BY_LEXING.values()), ids=list(HIDDEN_BY_LEXING))
def test_text_one_database_reads_as_code_is_not_hidden_by_another_s_quotes(sql: str) -> None:
    assert isinstance(sql_select_only(sql), Deny)


@pytest.mark.parametrize("sql", STILL_READ_ONLY)
def test_brackets_backticks_and_numbers_in_a_plain_select_still_pass(sql: str) -> None:
    assert select_problem(sql) is None


def test_the_reason_says_which_reading_found_the_problem() -> None:
    problem = select_problem(HIDDEN_BY_LEXING["bracket-hides-delete"]) or ""

    assert "only one statement" in problem
    assert "SQLite" in problem


def test_a_bracketed_name_does_not_smuggle_a_delete_into_sqlite() -> None:
    sql = HIDDEN_BY_LEXING["bracket-hides-delete"]
    db = sqlite3.connect(":memory:")
    db.executescript("CREATE TABLE orders (id INTEGER); INSERT INTO orders VALUES (1), (2);")

    assert select_problem(sql) is not None
    db.executescript(sql)  # what a script-running driver would do had it passed
    assert db.execute("SELECT count(*) FROM orders").fetchone() == (0,)


POSTGRESQL_WRITERS = [
    "lo_creat(-1)",
    "lo_create(0)",
    "lo_open(16384, 131072)",
    "lowrite(lo_open(lo_creat(-1), 131072), 'x')",
    "lo_truncate(0, 0)",
    "lo_truncate64(0, 0)",
    "lo_put(16384, 0, 'x')",
    "lo_from_bytea(0, 'x')",
    "lo_import('/etc/passwd')",
    "lo_export(16384, '/tmp/x')",
    "lo_unlink(16384)",
    "pg_stat_reset()",
    "pg_stat_reset_shared('bgwriter')",
    "pg_stat_reset_single_table_counters(0)",
    "pg_stat_reset_slru(NULL)",
    "txid_current()",
    "pg_current_xact_id()",
    "pg_file_write('x', 'y', false)",
    "pg_file_rename('x', 'y')",
    "pg_file_unlink('x')",
    "pg_create_physical_replication_slot('s')",
    "pg_create_logical_replication_slot('s', 'pgoutput')",
    "pg_drop_replication_slot('s')",
    "pg_logical_slot_get_changes('s', NULL, NULL)",
    "pg_replication_origin_create('o')",
    "pg_promote()",
    "pg_reload_conf()",
    "pg_rotate_logfile()",
    "pg_cancel_backend(1)",
    "pg_terminate_backend(1)",
    "set_config('work_mem', '1GB', false)",
    "nextval('s')",
    "setval('s', 1)",
    "pg_advisory_lock(1)",
    "pg_advisory_lock_shared(1)",
    "pg_advisory_xact_lock_shared(1)",
    "pg_try_advisory_lock_shared(1)",
    "pg_advisory_unlock(1)",
    "pg_advisory_unlock_all()",
    "dblink_exec('host=x', 'DELETE FROM t')",
    "dblink_open('c', 'SELECT 1')",
    "pg_backup_start('b')",
    "pg_wal_replay_pause()",
    "pg_import_system_collations('pg_catalog')",
    "pg_log_backend_memory_contexts(1)",
    "get_lock('x', 10)",
]


@pytest.mark.parametrize("call", POSTGRESQL_WRITERS)
def test_a_function_that_writes_or_locks_is_refused(call: str) -> None:
    problem = select_problem(f"SELECT {call}")

    assert problem is not None and "has side effects" in problem
