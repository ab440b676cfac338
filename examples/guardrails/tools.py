"""The reporting database the guardrails example queries: orders in SQLite.

The connection is read-only too (`PRAGMA query_only`): the SQL whitelist is one layer,
the database's own refusal is the next (seed 001 §3.6).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from pi_runtime import tool

ORDERS = [
    ("A-1001", "U00012345", "paid", 129.0),
    ("A-1002", "U00012345", "shipped", 58.5),
    ("A-1003", "U00067890", "paid", 310.0),
    ("A-1004", "U00067890", "cancelled", 42.0),
    ("A-1005", "U00024680", "delivered", 99.9),
]


def _database() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE orders (id TEXT, user_id TEXT, status TEXT, total REAL)")
    db.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", ORDERS)
    db.execute("PRAGMA query_only = ON")
    return db


@tool(timeout_s=10)
def run_sql(sql: str) -> list[list[Any]]:
    """Run one read-only SQL query on the reporting database and return its rows.

    Table `orders(id, user_id, status, total)`; status is pending, paid, shipped,
    delivered or cancelled. Only a single SELECT statement is accepted.
    """
    with _database() as db:
        return [list(row) for row in db.execute(sql).fetchmany(50)]


TOOLS = [run_sql]
