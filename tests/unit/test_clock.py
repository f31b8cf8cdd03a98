"""The runtime's clock: wall time unless the process or the context overrides it."""

from __future__ import annotations

import threading
import time

from longstep import clock


def test_default_is_wall_time():
    before = time.time()
    assert before <= clock.now() <= time.time()


def test_process_source_is_read_by_every_thread():
    clock.set_source(lambda: 1_000.0)
    try:
        seen = []
        worker = threading.Thread(target=lambda: seen.append(clock.now()))
        worker.start()
        worker.join(timeout=10)
        assert seen == [1_000.0] and clock.now() == 1_000.0
        assert clock.now_utc().isoformat() == "1970-01-01T00:16:40+00:00"
    finally:
        clock.set_source(None)
    assert clock.now() > 1_000_000_000


def test_context_source_wins_over_the_process_source_in_its_context_only():
    clock.set_source(lambda: 1.0)
    try:
        with clock.use_source(lambda: 2.0):
            assert clock.now() == 2.0
            seen = []
            worker = threading.Thread(target=lambda: seen.append(clock.now()))  # a new thread: no context copied
            worker.start()
            worker.join(timeout=10)
            assert seen == [1.0]
        assert clock.now() == 1.0
    finally:
        clock.set_source(None)


def test_approval_table_reads_the_runtime_clock():
    from longstep.humans.table import ApprovalTable

    table = ApprovalTable("t", client=None)
    with clock.use_source(lambda: 42.0):
        assert table.clock() == 42.0
