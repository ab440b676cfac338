"""Suite-wide scheduling: the slow tests first, the embedded model's on one worker.

Under pytest-xdist (`make test` runs two workers with `--dist loadgroup`) each worker asks
for the next test when it is nearly done with its own, in collection order: started
first, the long tests run beside the many short ones instead of leaving one worker busy
after the other has finished. Tests marked `embedded_model` form one group that a single
worker runs one after another: two at once would each start llama.cpp's threads on the
same two cores (test_worker_faults.py groups its suites the same way). A serial run
takes as long either way.
"""

from __future__ import annotations

import os

import pytest

# Prompts an earlier run saved on disk would make what a test of the embedded model reads
# depend on the machine's past: the suite and the processes it starts save none, unless a
# test gives its own directory (test_local_saved.py).
os.environ["PI_SAVED_PROMPTS"] = "off"

EMBEDDED_MODEL_GROUP = pytest.mark.xdist_group("embedded-model")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("embedded_model") is not None:
            item.add_marker(EMBEDDED_MODEL_GROUP)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable
