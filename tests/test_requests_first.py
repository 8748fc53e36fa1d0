"""Background work gives way to requests (urchin.requests_first): `give_way` waits while a request is
being answered, never longer than asked, and not at all otherwise; marks nest and overlap."""

from __future__ import annotations

import threading
import time

from urchin.requests_first import GRACE_S, Serving, give_way, serving


def test_give_way_returns_at_once_when_no_request_is_being_answered() -> None:
    started = time.monotonic()
    assert give_way(5.0) is False
    assert time.monotonic() - started < 1.0


def test_give_way_waits_until_the_request_is_answered() -> None:
    mark = Serving()
    threading.Timer(0.2, mark.done).start()
    started = time.monotonic()
    assert give_way(30.0) is True
    waited = time.monotonic() - started
    assert 0.1 < waited < 10.0          # released by the answer, not by the 30 s bound


def test_give_way_never_waits_longer_than_asked() -> None:
    with serving():
        started = time.monotonic()
        assert give_way(0.1) is True
        assert time.monotonic() - started < 5.0


def test_marks_nest_and_overlap_and_done_twice_counts_once() -> None:
    first, second = Serving(), Serving()
    first.done()
    first.done()                        # a second done() (the response started, then the finally)
    assert give_way(0.01) is True       # the second request is still being answered
    second.done()
    time.sleep(GRACE_S * 2)
    assert give_way(5.0) is False
    with serving(), serving():
        assert give_way(0.01) is True
    time.sleep(GRACE_S * 2)
    assert give_way(5.0) is False


def test_give_way_waits_out_the_grace_after_a_request_then_goes_on() -> None:
    """A client's requests one after another leave gaps of a millisecond or two: background work waits
    GRACE_S after the last one ended (a step begun in the gap held the interpreter against the next
    request), and no longer."""
    with serving():
        pass
    started = time.monotonic()
    assert give_way(5.0) is True
    assert GRACE_S * 0.5 <= time.monotonic() - started < 2.0
    assert give_way(5.0) is False

