"""Writes this example's scripts (run it after changing a step): `python -m examples.plan.make_scripts`.

Each script is what a model would answer, call by call, in plan mode: the planner's plan,
each step's executor calls and report, the reflector's verdicts, the final answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def say(text: str | dict[str, Any]) -> dict[str, Any]:
    return {"text": text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def plan(*steps: tuple[str, list[str]]) -> dict[str, Any]:
    return say({"steps": [{"goal": goal, "tools": tools} for goal, tools in steps]})


def verdict(done: bool, reason: str, *, replan: bool = False) -> dict[str, Any]:
    return say({"done": done, "replan": replan, "reason": reason})


TRIP_LEGS = [
    ("查询上海 2026-12-06 的天气", ["get_weather"]),
    ("为下雨的那天创建带伞提醒", ["create_reminder"]),
]

# The trip: the first plan's first step fails (an English city name), the reflector asks
# for a new plan, and the second plan goes through.
TRIP = [
    plan(("查询北京 2026-12-05 的天气", ["get_weather"]), *TRIP_LEGS),
    call("get_weather", city="Beijing", date="2026-12-05"),
    say("查询失败：get_weather 不认识城市 Beijing（not_found），它要中文城市名。"),
    verdict(False, "城市名要写中文“北京”，这一步没有拿到天气。", replan=True),
    plan(("用中文城市名查询北京 2026-12-05 的天气", ["get_weather"]), *TRIP_LEGS),
    call("get_weather", city="北京", date="2026-12-05"),
    say("北京 12 月 5 日雷阵雨，9–13°C。"),
    verdict(True, "拿到了北京当天的天气。"),
    call("get_weather", city="上海", date="2026-12-06"),
    say("上海 12 月 6 日阴，18–26°C，不下雨。"),
    verdict(True, "拿到了上海当天的天气。"),
    call("create_reminder", text="明天北京有雷阵雨，记得带伞", when="2026-12-04 20:00"),
    say("已创建提醒：12 月 4 日 20:00，带伞。"),
    verdict(True, "提醒已创建，只为下雨的北京。"),
    say(
        "## 摘要\n12 月 5 日北京有雷阵雨，已提醒你带伞；12 月 6 日上海阴天，不下雨。\n\n"
        "## 详情\n- 北京 12 月 5 日：雷阵雨，9–13°C\n- 上海 12 月 6 日：阴，18–26°C\n\n"
        "## 行动项\n- 12 月 4 日 20:00 的提醒：带伞去北京"
    ),
]

# One dry city: a one-step plan, no reminder. The planner's first answer is prose, and
# the plan contract's repair turn gets the JSON.
DRY = [
    say("我会先查深圳的天气，再决定要不要提醒。"),
    plan(("查询深圳 2026-12-06 的天气", ["get_weather"])),
    call("get_weather", city="深圳", date="2026-12-06"),
    say("深圳 12 月 6 日晴，15–19°C。"),
    verdict(True, "拿到了深圳当天的天气。"),
    say(
        "## 摘要\n12 月 6 日深圳晴天，不用带伞。\n\n"
        "## 详情\n- 深圳 12 月 6 日：晴，15–19°C\n\n"
        "## 行动项\n- 无"
    ),
]


def main() -> None:
    for path, steps in ((HERE / "script.json", TRIP), (HERE / "scripts" / "dry.json", DRY)):
        text = json.dumps({"steps": steps}, ensure_ascii=False, indent=1)
        path.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
