"""The event kernel: explicit tie-break order, seeded randomness on the environment, errors never swallowed."""

from __future__ import annotations

import pytest

from scaleright.serve.kernel import Environment, Priority


def test_events_run_by_time_then_priority_then_scheduling_order():
    env = Environment()
    seen = []
    env.schedule(2.0, Priority.ARRIVAL, lambda e, tag: seen.append((e.now, tag)), "late")
    env.schedule(1.0, Priority.SCHEDULE, lambda e, tag: seen.append((e.now, tag)), "schedule")
    env.schedule(1.0, Priority.ARRIVAL, lambda e, tag: seen.append((e.now, tag)), "arrival-1")
    env.schedule(1.0, Priority.ARRIVAL, lambda e, tag: seen.append((e.now, tag)), "arrival-2")
    env.schedule(1.0, Priority.ITERATION_END, lambda e, tag: seen.append((e.now, tag)), "end")
    env.run()
    assert seen == [(1.0, "end"), (1.0, "arrival-1"), (1.0, "arrival-2"), (1.0, "schedule"), (2.0, "late")]
    assert env.events_processed == 5


def test_run_until_stops_before_later_events_and_advances_the_clock():
    env = Environment()
    seen = []
    env.schedule(1.0, 0, lambda e: seen.append(e.now))
    env.schedule(3.0, 0, lambda e: seen.append(e.now))
    env.run(until=2.0)
    assert seen == [1.0] and env.now == 2.0 and env.peek() == 3.0


def test_handlers_schedule_follow_on_events():
    env = Environment()
    seen = []

    def tick(e, k):
        seen.append(e.now)
        if k:
            e.schedule(e.now + 0.5, 0, tick, k - 1)

    env.schedule(0.0, 0, tick, 3)
    env.run()
    assert seen == [0.0, 0.5, 1.0, 1.5]


def test_an_error_in_a_handler_propagates():
    env = Environment()

    def boom(e):
        raise RuntimeError("handler failed")

    env.schedule(0.0, 0, boom)
    with pytest.raises(RuntimeError, match="handler failed"):
        env.run()


def test_scheduling_in_the_past_is_refused():
    env = Environment()
    env.schedule(1.0, 0, lambda e: e.schedule(0.5, 0, lambda e2: None))
    with pytest.raises(ValueError, match="in the past"):
        env.run()


def test_same_seed_same_draws_and_no_state_shared_between_environments():
    a, b, c = Environment(7), Environment(7), Environment(8)
    assert (a.rng.random(5) == b.rng.random(5)).all()
    assert not (Environment(7).rng.random(5) == c.rng.random(5)).all()
