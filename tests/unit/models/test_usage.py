"""The usage tally of a generative backend (``operators.models.usage``): totals over every
thread, and meters that see only their own thread's calls (one question's usage while other
questions are answered on the same backend)."""

from __future__ import annotations

import threading

from bookindex.operators.models.usage import UsageTally, metered, no_usage


def test_meters_see_their_own_threads_calls_and_the_totals_see_all():
    tally = UsageTally("embedding_tokens")
    readings: dict[int, dict] = {}
    start = threading.Barrier(4)

    def question(n: int) -> None:
        start.wait()  # the four threads count at the same time
        with tally.meter() as used:
            for _ in range(200):
                tally.add(requests=1, prompt_tokens=n, completion_tokens=1)
        readings[n] = used

    threads = [threading.Thread(target=question, args=(n,)) for n in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tally.add(embedding_tokens=5, requests=1)  # outside every meter: the totals only
    for n in range(1, 5):
        assert readings[n] == {"prompt_tokens": 200 * n, "completion_tokens": 200, "requests": 200}
    assert tally.totals == {
        "prompt_tokens": 200 * (1 + 2 + 3 + 4),
        "completion_tokens": 800,
        "requests": 801,
        "embedding_tokens": 5,
    }


def test_nested_meters_both_count_and_a_backend_without_a_tally_reads_zero():
    tally = UsageTally()
    with tally.meter() as outer:
        tally.add(requests=1, prompt_tokens=3)
        with tally.meter() as inner:
            tally.add(requests=1, completion_tokens=2)
    assert outer == {"prompt_tokens": 3, "completion_tokens": 2, "requests": 2}
    assert inner == {"prompt_tokens": 0, "completion_tokens": 2, "requests": 1}
    with metered(object()) as used:
        pass
    assert used == no_usage()
