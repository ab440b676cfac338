"""The office tools of seed 002: meeting rooms and to-dos, beside the weather.

Deterministic (the same question gets the same answer) so that suites can check them.
`get_meeting_room` takes the time range as a pair and names rooms by numeric id, the two
things the seed's first tool definition left the model to guess.
"""

from __future__ import annotations

import hashlib
import re
from datetime import date as _date

from pi_runtime import ToolError, tool

ROOMS = {101: ("长城", 6), 102: ("黄河", 10), 201: ("泰山", 4), 202: ("昆仑", 16)}
TODOS: dict[str, dict[str, str]] = {}
_TIME = re.compile(r"([01]\d|2[0-3]):[0-5]\d")


def _day(value: str, field: str) -> str:
    try:
        return _date.fromisoformat(value).isoformat()
    except ValueError:
        raise ToolError(f"{field} {value!r} 不是 YYYY-MM-DD", kind="invalid_arguments") from None


@tool
def get_meeting_room(date: str, start_time: str, end_time: str) -> dict[str, object]:
    """查询某天某个时间段内空闲的会议室。start_time 和 end_time 必须成对给出。

    Args:
        date: 日期，格式 YYYY-MM-DD。
        start_time: 开始时间，24 小时制 HH:MM，例如 14:00。
        end_time: 结束时间，24 小时制 HH:MM，晚于 start_time。
    """
    day = _day(date, "date")
    if not (_TIME.fullmatch(start_time) and _TIME.fullmatch(end_time)):
        raise ToolError("时间必须是 HH:MM，例如 14:00", kind="invalid_arguments")
    if end_time <= start_time:
        raise ToolError("end_time 必须晚于 start_time", kind="invalid_arguments")
    seed = int(hashlib.sha256(f"{day}{start_time}{end_time}".encode()).hexdigest(), 16)
    free = [
        {"room_id": room_id, "name": name, "capacity": capacity}
        for i, (room_id, (name, capacity)) in enumerate(sorted(ROOMS.items()))
        if (seed >> i) & 1 or room_id == 202
    ]
    return {"date": day, "start_time": start_time, "end_time": end_time, "free_rooms": free}


@tool(idempotent=False)
def create_todo(title: str, due_date: str, idempotency_key: str) -> dict[str, object]:
    """创建一条待办事项。有副作用：同一请求只会创建一次。

    Args:
        title: 待办内容，一句话。
        due_date: 截止日期，格式 YYYY-MM-DD。
    """
    due = _day(due_date, "due_date")
    created = idempotency_key not in TODOS
    TODOS.setdefault(idempotency_key, {"title": title, "due_date": due})
    return {"todo_id": idempotency_key[-12:], "created": created, **TODOS[idempotency_key]}


TOOLS = [get_meeting_room, create_todo]
