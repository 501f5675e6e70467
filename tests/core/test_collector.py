"""apps.core.collector: the cyclic collector paused around a block, and left as it was found."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from apps.core.collector import collector_paused


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    (gc.enable if enabled else gc.disable)()


def test_paused_inside_and_enabled_again_after() -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_enabled_again_after_an_error() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_nested_block_does_not_end_the_outer_pause() -> None:
    gc.enable()
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_two_threads_share_one_pause() -> None:
    gc.enable()
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            leave.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(5)
    with collector_paused():
        pass
    assert not gc.isenabled()  # the other thread's block is still running
    leave.set()
    thread.join(5)
    assert gc.isenabled()
