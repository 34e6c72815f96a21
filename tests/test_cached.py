"""``lakequery.cached.cached_property``: computed once per instance, and one instance's
computation never waits for another's (Python 3.11's ``functools`` one held a lock per
property for every instance: a thread planning a large scan stalled every other plan,
and a fork during a plan left the child's lock held)."""

from __future__ import annotations

import threading

from lakequery.cached import cached_property


class Slow:
    calls = 0

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.started = threading.Event()

    @cached_property
    def value(self) -> int:
        """The doc."""
        Slow.calls += 1
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        return id(self)


def test_one_instance_computing_does_not_hold_up_another() -> None:
    gate = threading.Event()
    blocked = Slow(gate)
    worker = threading.Thread(target=lambda: blocked.value)
    worker.start()
    assert blocked.started.wait(5)  # the first computation is under way
    try:
        done = threading.Event()
        other = Slow()
        runner = threading.Thread(target=lambda: (other.value, done.set()))
        runner.start()
        assert done.wait(5), "the second instance waited for the first one's computation"
    finally:
        gate.set()
        worker.join(10)
    assert blocked.value == id(blocked)


def test_computed_once_and_stored_on_the_instance() -> None:
    Slow.calls = 0
    s = Slow()
    assert s.value == s.value == id(s)
    assert Slow.calls == 1 and s.__dict__["value"] == id(s)
    assert Slow.value.__doc__ == "The doc."
