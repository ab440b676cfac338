"""Suite-wide ordering: the slow tests first.

Under pytest-xdist (`make test` runs two workers) tests go out in collection order, so a
long test collected late leaves one worker busy after the other has finished; started
first, the long tests run beside the many short ones. A serial run takes as long either way.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable
