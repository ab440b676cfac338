"""`pi bench qrp`: what a model reads, compact JSON against QRP1, in bytes and exact tokens.

The experiment of seed 004, on deterministic synthetic data (no model is called):

- `klines`: hourly K-lines at 1 / 500 / 5,000 / 10,000 rows, at most 500 rows a page. Both
  sides carry the same values, source, range, snapshot and paging; a page that has a next
  one carries the same fixed 384-byte cursor on both sides.
- `products`: 500 objects (id, name, price, active) — compact JSON against a QRP1 table;
  the row also shows the seed's generic path expansion (`path,value_type,part,parts,value`,
  300 records a page) rebuilt here, next to the seed's own figures.
- `relay-*`: handing 5,000 rows to a compute tool. `relay-json` returns JSON pages and the
  model copies the rows into the next call's arguments; `relay-qrp` returns QRP1 pages and
  still copies the rows; `relay-locator` passes only where the data is. Each relay row holds
  `relay-json` in `json_*` and its own mode in `qrp_*`.

Tokens are o200k_base counts of the exact text, not a provider's billing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from ..context import count_tokens
from ..qrp1 import PageInfo, decode, encode
from ..qrp1.columns import Column
from ..qrp1.header import Header, format_header
from ..qrp1.rows import write_rows

KLINE_ROWS = (1, 500, 5_000, 10_000)
PAGE_ROWS = 500
PRODUCT_ROWS = 500
PATH_PAGE_ROWS = 300
RELAY_ROWS = 5_000
STEP_MS = 3_600_000
START = datetime(2026, 9, 8, tzinfo=UTC)
SOURCE = "synthetic:BNBUSDT:1h"
CATALOG = "synthetic:catalog"
SNAPSHOT = "snap-20260908-7f3a9c"
LOGIC = "ma_cross(fast=20, slow=50) on close; list every crossover"

# The seed's published figures, shown next to ours (bytes and o200k_base tokens).
SEED_KLINES = {
    1: (649, 589, 253, 258),
    500: (61_200, 23_910, 26_163, 13_416),
    5_000: (617_470, 249_591, 265_311, 140_360),
    10_000: (1_235_675, 503_006, 531_332, 281_709),
}
SEED_PRODUCTS = {"json": (34_968, 11_405), "paths": (82_029, 38_357)}
SEED_LOCATOR_TOKENS = 64

_ADJECTIVES = ("Classic", "Modern", "Compact", "Deluxe", "Rustic", "Smart", "Portable",
               "Vintage", "Eco", "Premium", "Basic", "Ultra")  # fmt: skip
_NOUNS = ("Mug", "Lamp", "Chair", "Kettle", "Backpack", "Notebook", "Jacket", "Bottle",
          "Clock", "Blanket", "Speaker", "Vase")  # fmt: skip


def cursor() -> str:
    """A fixed, opaque 384-byte cursor (base64url of 288 derived bytes)."""
    raw = hashlib.shake_256(b"pi bench qrp cursor").digest(288)
    return base64.urlsafe_b64encode(raw).decode()


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def klines(count: int, *, seed: int = 20260908) -> list[dict[str, Any]]:
    """Hourly closed K-lines: a random walk near 600 to the cent, volumes to 4 decimals.

    Magnitudes chosen so a compact JSON row is the seed's size: ~121 bytes, ~52 tokens.
    """
    rng = random.Random(seed)
    price = 600.0
    rows = []
    for hour in range(count):
        open_ = round(price, 2)
        close = round(max(1.0, open_ * (1 + rng.gauss(0, 0.006))), 2)
        rows.append(
            {
                "time": iso(START + timedelta(hours=hour)),
                "open": open_,
                "high": round(max(open_, close) * (1 + abs(rng.gauss(0, 0.003))), 2),
                "low": round(min(open_, close) * (1 - abs(rng.gauss(0, 0.003))), 2),
                "close": close,
                "volume": round(rng.lognormvariate(8.0, 0.6), 4),
                "closed": True,
            }
        )
        price = close
    return rows


def products(count: int, *, seed: int = 11) -> list[dict[str, Any]]:
    """Catalogue items: id, name, price, active — the shape the seed describes."""
    rng = random.Random(seed)
    return [
        {
            "id": f"SKU-{10_000 + i}",
            "name": f"{rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)}",
            "price": round(rng.uniform(5, 2000), 2),
            "active": rng.random() < 0.85,
        }
        for i in range(1, count + 1)
    ]


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def size(texts: list[str]) -> tuple[int, int]:
    """(UTF-8 bytes, o200k_base tokens) of texts read one after another."""
    return sum(len(t.encode()) for t in texts), sum(count_tokens(t) for t in texts)


def kline_pages(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The same pages twice: compact JSON objects and QRP1 series."""
    total = len(rows)
    pages = max(1, -(-total // PAGE_ROWS))
    span = f"{iso(START)}/{iso(START + timedelta(hours=total))}"
    as_json, as_qrp = [], []
    for index in range(pages):
        offset = index * PAGE_ROWS
        chunk = rows[offset : offset + PAGE_ROWS]
        next_cursor = cursor() if index + 1 < pages else None
        envelope: dict[str, Any] = {
            "source": SOURCE,
            "snapshot": SNAPSHOT,
            "range": span,
            "page": index + 1,
            "pages": pages,
            "offset": offset,
            "total": total,
            "rows": chunk,
        }
        if next_cursor:
            envelope["next_cursor"] = next_cursor
        as_json.append(compact(envelope))
        page = PageInfo(number=index + 1, count=pages, offset=offset, total=total, next=next_cursor)
        text = encode(chunk, kind="series", source=SOURCE, snapshot=SNAPSHOT, range=span,
                      page=page, t0=iso(START), step_ms=STEP_MS)  # fmt: skip
        if decode(text) != chunk:
            raise AssertionError("QRP1 page did not decode to its rows")
        as_qrp.append(text)
    return as_json, as_qrp


def path_pages(items: list[dict[str, Any]]) -> list[str]:
    """The seed's generic encoding: one `path,value_type,part,parts,value` record per leaf."""
    names = {bool: "bool", int: "int", float: "f64", str: "str"}
    records = [
        {"path": f"$[{i}].{key}", "value_type": names[type(value)], "part": 1, "parts": 1,
         "value": json.dumps(value) if not isinstance(value, str) else value}
        for i, item in enumerate(items)
        for key, value in item.items()
    ]  # fmt: skip
    columns = [Column("path", "str"), Column("value_type", "str"), Column("part", "int"),
               Column("parts", "int"), Column("value", "str")]  # fmt: skip
    pages = -(-len(records) // PATH_PAGE_ROWS)
    texts = []
    for index in range(pages):
        chunk = records[index * PATH_PAGE_ROWS : (index + 1) * PATH_PAGE_ROWS]
        header = Header(kind="table", source=CATALOG, snapshot=SNAPSHOT, page=index + 1,
                        pages=pages, offset=index * PATH_PAGE_ROWS, total=len(records),
                        rows=len(chunk), cols=tuple(columns),
                        next=cursor() if index + 1 < pages else None)  # fmt: skip
        texts.append("\n".join([format_header(header), *write_rows(chunk, columns)]))
    return texts


def saved_pct(before: int, after: int) -> float:
    """1 − after/before in percent; two decimals near 100 so a real cost never reads as 0."""
    pct = 100 * (1 - after / before)
    return round(pct, 2) if pct >= 99.95 and after else round(pct, 1)


def _row(
    case: str, rows: int, json_size: tuple[int, int], qrp_size: tuple[int, int]
) -> dict[str, Any]:
    (json_bytes, json_tokens), (qrp_bytes, qrp_tokens) = json_size, qrp_size
    return {
        "case": case,
        "rows": rows,
        "json_bytes": json_bytes,
        "qrp_bytes": qrp_bytes,
        "bytes_saved_pct": saved_pct(json_bytes, qrp_bytes),
        "json_tokens": json_tokens,
        "qrp_tokens": qrp_tokens,
        "tokens_saved_pct": saved_pct(json_tokens, qrp_tokens),
    }


def measure(kline_rows: tuple[int, ...] = KLINE_ROWS) -> dict[str, Any]:
    """Rows for every case, with the seed's figures beside ours where it gave them."""
    out: list[dict[str, Any]] = []
    series = klines(max((*kline_rows, RELAY_ROWS)))
    for count in kline_rows:
        as_json, as_qrp = kline_pages(series[:count])
        row = _row("klines", count, size(as_json), size(as_qrp))
        row["pages"] = len(as_qrp)
        if count in SEED_KLINES:
            row.update(zip(("seed_json_bytes", "seed_qrp_bytes", "seed_json_tokens",
                            "seed_qrp_tokens"), SEED_KLINES[count], strict=True))  # fmt: skip
        out.append(row)

    items = products(PRODUCT_ROWS)
    table = encode(items, kind="table", source=CATALOG, snapshot=SNAPSHOT)
    if decode(table) != items:
        raise AssertionError("QRP1 table did not decode to the products")
    envelope = compact({"source": CATALOG, "snapshot": SNAPSHOT, "rows": items})
    row = _row("products", PRODUCT_ROWS, size([envelope]), size([table]))
    paths = size(path_pages(items))
    row.update(paths_bytes=paths[0], paths_tokens=paths[1])
    row.update(seed_json_bytes=SEED_PRODUCTS["json"][0], seed_json_tokens=SEED_PRODUCTS["json"][1],
               seed_paths_bytes=SEED_PRODUCTS["paths"][0],
               seed_paths_tokens=SEED_PRODUCTS["paths"][1])  # fmt: skip
    out.append(row)

    rows = series[:RELAY_ROWS]
    as_json, as_qrp = kline_pages(rows)
    copied = compact({"klines": rows, "logic": LOGIC})
    end = iso(START + timedelta(hours=RELAY_ROWS))
    locator = compact({"source": "synthetic", "symbol": "BNBUSDT", "interval": "1h",
                       "start": iso(START), "end": end, "logic": LOGIC})  # fmt: skip
    baseline = size([*as_json, copied])
    out.append(_row("relay-json", RELAY_ROWS, baseline, baseline))
    out.append(_row("relay-qrp", RELAY_ROWS, baseline, size([*as_qrp, copied])))
    out.append(_row("relay-locator", RELAY_ROWS, baseline, size([locator])))
    out[-1]["seed_qrp_tokens"] = SEED_LOCATOR_TOKENS
    return {"bench": "qrp", "rows": out, "tokenizer": "o200k_base", "page_rows": PAGE_ROWS,
            "cursor_bytes": len(cursor())}  # fmt: skip
