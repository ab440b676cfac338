"""Weather + reminder tools (seeds 001/002): one read-only tool, one with a side effect."""

from __future__ import annotations

import hashlib
from datetime import date as _date

from pi_runtime import ToolError, tool

_SKIES = ["晴", "多云", "小雨", "阴", "雷阵雨"]
_CITIES = {"北京", "上海", "广州", "深圳", "杭州", "成都", "武汉", "西安"}

# A reminder service that honours idempotency keys: the same key never creates twice.
REMINDERS: dict[str, dict[str, str]] = {}


@tool
def get_weather(city: str, date: str | None = None) -> dict[str, object]:
    """查询指定城市在指定日期的天气。当用户提到城市且需要天气信息时使用。

    Args:
        city: 城市中文名，例如 北京、上海。必须是中国城市的中文名称。
        date: 日期，格式 YYYY-MM-DD。用户没有指定日期时不要填写。
    """
    if city not in _CITIES:
        raise ToolError(
            f"未知城市 {city!r}", kind="not_found", hint="使用中国城市的中文名称，例如 北京。"
        )
    day = date or _date.today().isoformat()
    try:
        _date.fromisoformat(day)
    except ValueError:
        raise ToolError(f"日期 {day!r} 不是 YYYY-MM-DD", kind="invalid_arguments") from None
    seed = int(hashlib.sha256(f"{city}{day}".encode()).hexdigest(), 16)
    low = 5 + seed % 15
    return {
        "city": city,
        "date": day,
        "sky": _SKIES[seed % len(_SKIES)],
        "temp_min": low,
        "temp_max": low + 3 + seed % 8,
    }


@tool(idempotent=False)
def create_reminder(text: str, when: str, idempotency_key: str) -> dict[str, object]:
    """创建一条提醒。这是有副作用的操作：同一请求只会创建一次。

    Args:
        text: 提醒内容，一句话。
        when: 提醒时间，格式 YYYY-MM-DD HH:MM。
    """
    created = idempotency_key not in REMINDERS
    REMINDERS.setdefault(idempotency_key, {"text": text, "when": when})
    return {"reminder_id": idempotency_key[-12:], "created": created, **REMINDERS[idempotency_key]}


TOOLS = [get_weather, create_reminder]
