"""The GPU-time library's pure core (agent/gputime/gputime_core.c), compiled here and driven by ctypes:
a process's busy time is the union of its intervals, never counted twice, whatever order they come in."""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

CORE = Path(__file__).resolve().parents[2] / "agent" / "gputime" / "gputime_core.c"
MAX_DEVICES = 64


class Interval(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint64), ("end", ctypes.c_uint64)]


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is needed (scripts/bootstrap.sh installs gcc)"
    lib = tmp_path_factory.mktemp("core") / "libcore.so"
    subprocess.run(
        [cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-o", str(lib), str(CORE)],
        check=True,
    )
    dll = ctypes.CDLL(str(lib))
    dll.fw_busy_ns.restype = ctypes.c_uint64
    dll.fw_add.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.POINTER(Interval), ctypes.c_size_t]
    dll.fw_busy_ns.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    dll.fw_state_init.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    dll.fw_format.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_long, ctypes.c_uint64, ctypes.c_uint64,
        ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64,
    ]  # fmt: skip
    dll.fw_set_uuid.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_char_p]
    dll.fw_kernel_id.argtypes = [ctypes.c_char_p]
    dll.fw_kernel_id.restype = ctypes.c_uint64
    dll.fw_kernel_add.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint64, ctypes.c_uint64]
    dll.fw_set_bins.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    dll.fw_estimate.argtypes = [
        ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_double, ctypes.c_double,
    ]  # fmt: skip
    dll.fw_busy_between.argtypes = [
        ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint64, ctypes.c_uint64,
        ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
    ]  # fmt: skip
    return dll


class State:
    """One fw_state, of the C struct's size."""

    def __init__(self, core: ctypes.CDLL, horizon_ns: int) -> None:
        self.core = core
        core.fw_state_size.restype = ctypes.c_size_t
        self.buf = ctypes.create_string_buffer(core.fw_state_size())
        core.fw_state_init(self.buf, horizon_ns)

    def add(self, device: int, pairs: list[tuple[int, int]]) -> None:
        arr = (Interval * len(pairs))(*[Interval(a, b) for a, b in pairs])
        assert self.core.fw_add(self.buf, device, arr, len(pairs)) == 0

    def busy(self, device: int = 0) -> int:
        return int(self.core.fw_busy_ns(self.buf, device))

    def json(self, **kw: int) -> dict[str, object]:
        out = ctypes.create_string_buffer(1 << 16)
        n = self.core.fw_format(
            self.buf,
            out,
            len(out),
            kw.get("pid", 42),
            kw.get("pidns", 7),
            kw.get("start", 99),
            kw.get("now", 123),
            kw.get("final", 0),
            3,
        )
        assert n > 0
        doc: dict[str, object] = json.loads(out.value[:n])
        return doc

    def close(self) -> None:
        self.core.fw_state_free(self.buf)


@pytest.fixture
def state(core: ctypes.CDLL) -> Iterator[State]:
    s = State(core, horizon_ns=1_000)
    yield s
    s.close()


def union_length(pairs: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for a, b in sorted(p for p in pairs if p[1] > p[0]):
        if reach is None or a > reach:
            total += b - a
            reach = b
        elif b > reach:
            total += b - reach
            reach = b
    return total


def test_overlapping_intervals_count_once(state: State) -> None:
    state.add(0, [(10, 20), (15, 30), (40, 50)])
    assert state.busy() == 30
    state.add(0, [(25, 45)])  # bridges the gap, in a later batch
    assert state.busy() == 40


def test_a_batch_in_any_order(state: State) -> None:
    state.add(0, [(40, 50), (0, 10), (5, 45)])
    assert state.busy() == 50


def test_empty_and_reversed_intervals_are_ignored(state: State) -> None:
    state.add(0, [(10, 10), (20, 5), (30, 31)])
    assert state.busy() == 1


def test_a_record_later_than_the_horizon_is_never_counted_twice(state: State) -> None:
    state.add(0, [(0, 100)])
    state.add(0, [(5_000, 5_010)])  # commits [0, 100): older than the 1,000 ns horizon
    assert state.busy() == 110
    state.add(0, [(50, 200)])  # late: [50, 100) already counted, [100, 200) is new
    assert state.busy() == 210
    state.add(0, [(60, 90)])  # late and wholly counted already
    assert state.busy() == 210


def test_devices_are_counted_apart_and_named(state: State) -> None:
    state.add(0, [(0, 10)])
    state.add(3, [(0, 25)])
    state.core.fw_set_uuid(state.buf, 3, b'GPU-abc"}\n,x')  # nothing that could break the JSON survives
    doc = state.json(final=1)
    assert doc["format"] == "fleetwatt-gputime" and doc["version"] == 1
    assert (doc["pid"], doc["pidns"], doc["start_ticks"], doc["final"], doc["dropped_records"]) == (42, 7, 99, True, 3)
    gpus = {g["device"]: g for g in doc["gpus"]}  # type: ignore[attr-defined]
    assert gpus[0]["busy_ns"] == 10 and gpus[0]["uuid"] == ""
    assert gpus[3]["busy_ns"] == 25 and gpus[3]["uuid"] == "GPU-abcx" and gpus[3]["records"] == 1


def test_device_numbers_past_the_table_are_ignored(state: State) -> None:
    state.add(MAX_DEVICES, [(0, 10)])
    assert state.json()["gpus"] == []


def test_format_refuses_a_buffer_too_small(state: State) -> None:
    state.add(0, [(0, 10)])
    out = ctypes.create_string_buffer(40)
    assert state.core.fw_format(state.buf, out, len(out), 1, 1, 1, 1, 0, 0) == -1


intervals = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 500)), max_size=60).map(
    lambda xs: [(a, a + d) for a, d in xs]
)


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(intervals, max_size=6))
def test_busy_time_is_the_union_whatever_the_batches(core: ctypes.CDLL, batches: list[list[tuple[int, int]]]) -> None:
    """Within the horizon the count is exact; past it, never more than the union (nothing twice)."""
    exact = State(core, horizon_ns=10**12)
    clipped = State(core, horizon_ns=50)
    try:
        seen: list[tuple[int, int]] = []
        for batch in batches:
            if not batch:
                continue
            exact.add(0, batch)
            clipped.add(0, batch)
            seen += batch
            assert exact.busy() == union_length(seen)
            assert clipped.busy() <= union_length(seen)
    finally:
        exact.close()
        clipped.close()


@settings(max_examples=100, deadline=None)
@given(batches=st.lists(intervals, max_size=6))
def test_batches_in_time_order_are_exact_past_the_horizon(
    core: ctypes.CDLL, batches: list[list[tuple[int, int]]]
) -> None:
    """Records that come in time order (CUPTI's usual case) are counted exactly however short the horizon."""
    s = State(core, horizon_ns=1)
    try:
        flat = sorted(p for b in batches for p in b)
        for i in range(0, len(flat), 7):
            s.add(0, flat[i : i + 7])
        assert s.busy() == union_length(flat)
    finally:
        s.close()


def test_a_launch_bound_stream_costs_the_same_per_record_however_many_are_open(core: ctypes.CDLL) -> None:
    """The tiny-kernel launcher: 146,000 kernels of 1.07 us a second, so a second's horizon holds
    146,000 open intervals. Batches of 256 in time order, and now and then one 100 batches late (it
    reaches into the middle of the open list): the union exact, and a record's work not a pass over the
    open list: the last batches, with a second's intervals open, cost a record about what the first
    ones did, with few open (a pass over the list made them 10 times dearer: 2-6 us a record, most of
    a core for this job alone)."""
    s = State(core, horizon_ns=1_000_000_000)
    period, length, n = 1_000_000_000 // 146_000, 1_070, 300_000
    starts = [1_000_000_000 + i * period for i in range(n)]
    batches = [[(a, a + length) for a in starts[i : i + 256]] for i in range(0, n, 256)]
    late = [(a + 3 * length, a + 4 * length) for a in starts[::25_600]]  # inside the gaps: new time
    for k in reversed(range(len(late))):
        batches.insert(k * 100 + 100, [late[k]])  # 100 batches (0.18 s) after its time
    arrays = [(Interval * len(b))(*[Interval(a, e) for a, e in b]) for b in batches]
    spent = []
    try:
        for arr in arrays:
            started = time.process_time()
            assert core.fw_add(s.buf, 0, arr, len(arr)) == 0
            spent.append(time.process_time() - started)
        assert s.busy() == n * length + len(late) * length
        first, last = sum(spent[:50]), sum(spent[-200:]) / 4  # 0-12,800 open, then 146,000
        assert last < 3 * first, f"{first / 12_800 * 1e9:.0f} then {last / 12_800 * 1e9:.0f} ns a record"
    finally:
        s.close()


def test_kernels_are_kept_by_id_and_the_busiest_shown(state: State) -> None:
    fnv = state.core.fw_kernel_id(b"")
    assert fnv == 0xCBF29CE484222325  # FNV-1a's offset basis: the hash of nothing
    ids = [state.core.fw_kernel_id(f"kernel_{i}".encode()) for i in range(20)]
    assert len(set(ids)) == 20
    for i, kid in enumerate(ids):
        for _ in range(3):
            state.core.fw_kernel_add(state.buf, 0, kid, 10 * (i + 1))
    (gpu,) = state.json()["gpus"]  # type: ignore[misc]
    shown = gpu["kernels"]
    assert len(shown) == 16  # the busiest 16 of 20, busiest first
    assert [k[0] for k in shown] == [f"{kid:016x}" for kid in reversed(ids[4:])]
    assert [k[1:] for k in shown[:2]] == [[600, 3], [570, 3]]
    assert gpu["other_kernels_ns"] == 0


def test_kernels_past_the_table_are_counted_as_other(state: State) -> None:
    for i in range(300):
        state.core.fw_kernel_add(state.buf, 0, i + 1, 5)
    (gpu,) = state.json()["gpus"]  # type: ignore[misc]
    assert gpu["other_kernels_ns"] == (300 - 256) * 5


MS = 1_000_000


def test_busy_time_per_bin_committed_and_open(core: ctypes.CDLL) -> None:
    s = State(core, horizon_ns=100 * MS)
    core.fw_set_bins(s.buf, 10 * MS)
    try:
        t0 = 10_000 * 10 * MS  # bin 10,000
        s.add(0, [(t0 + 2 * MS, t0 + 15 * MS), (t0 + 14 * MS, t0 + 18 * MS)])  # bins 10000: 8 ms, 10001: 8 ms
        s.add(0, [(t0 + 500 * MS, t0 + 505 * MS)])  # commits the first (older than 100 ms); bin 10050: 5 ms
        s.add(0, [(t0 + 507 * MS, t0 + 509 * MS)])  # still open: 10050 gets 2 ms more
        (gpu,) = s.json(now=t0 + 509 * MS)["gpus"]  # type: ignore[misc]
        assert gpu["bin_ns"] == 10 * MS
        first = gpu["bins_from"]
        assert first == 10_050 + 1 - 300
        bins = dict(enumerate(gpu["bins_us"], start=first))
        assert len(gpu["bins_us"]) == 300
        assert (bins[10_000], bins[10_001], bins[10_050]) == (8_000, 8_000, 7_000)
        assert sum(gpu["bins_us"]) * 1000 == s.busy()  # the bins add up to the busy time
    finally:
        s.close()


def test_without_bins_the_state_has_none(state: State) -> None:
    state.add(0, [(0, 10)])
    assert "bins_us" not in state.json()["gpus"][0]  # type: ignore[index]


US = 1_000


def test_stretches_too_short_to_hold_a_slice_are_binned_apart(core: ctypes.CDLL) -> None:
    """A launch-bound process's microsecond kernels are short stretches (the agent keeps them whole where
    claims overlap); a kernel of milliseconds, or short kernels run back to back, are not."""
    s = State(core, horizon_ns=100 * MS)
    core.fw_set_bins(s.buf, 10 * MS)
    try:
        t0 = 10_000 * 10 * MS
        tiny = [(t0 + i * 10 * US, t0 + i * 10 * US + 2 * US) for i in range(100)]  # 100 x 2 µs in bin 10,000
        s.add(0, tiny)
        s.add(0, [(t0 + 12 * MS, t0 + 18 * MS)])  # 6 ms in bin 10,001
        s.add(0, [(t0 + 25 * MS + i * 5 * US, t0 + 25 * MS + (i + 1) * 5 * US) for i in range(10)])  # 50 µs joined
        s.add(0, [(t0 + 500 * MS, t0 + 501 * MS)])  # commits the rest
        (gpu,) = s.json(now=t0 + 501 * MS)["gpus"]  # type: ignore[misc]
        first = gpu["bins_from"]
        bins = dict(enumerate(gpu["bins_us"], start=first))
        short = dict(enumerate(gpu["bins_short_us"], start=first))
        assert gpu["short_ns"] == 20 * US
        assert (bins[10_000], short[10_000]) == (200, 200)
        assert (bins[10_001], short[10_001]) == (6_000, 0)
        assert (bins[10_002], short[10_002]) == (50, 0)
        assert len(gpu["bins_short_us"]) == len(gpu["bins_us"])
    finally:
        s.close()


def test_time_not_traced_is_counted_at_the_window_share_and_said_apart(core: ctypes.CDLL) -> None:
    s = State(core, horizon_ns=100 * MS)
    core.fw_set_bins(s.buf, 10 * MS)
    try:
        t0 = 10_000 * 10 * MS
        window = [(t0 + i * 10 * US, t0 + i * 10 * US + 1 * US) for i in range(5_000)]  # 50 ms at 10 % busy
        s.add(0, window)
        busy, short = ctypes.c_uint64(), ctypes.c_uint64()
        core.fw_busy_between(s.buf, 0, t0, t0 + 50 * MS, ctypes.byref(busy), ctypes.byref(short))
        assert busy.value == short.value == 5 * MS
        share = busy.value / (50 * MS)
        core.fw_estimate(s.buf, 0, t0 + 50 * MS, t0 + 2_000 * MS, share, short.value / (50 * MS))
        assert s.busy() == 5 * MS + 195 * MS  # the window traced, 1.95 s counted at 10 %
        (gpu,) = s.json(now=t0 + 2_000 * MS)["gpus"]  # type: ignore[misc]
        assert gpu["estimated_ns"] == 195 * MS
        bins = dict(enumerate(gpu["bins_us"], start=gpu["bins_from"]))
        short_bins = dict(enumerate(gpu["bins_short_us"], start=gpu["bins_from"]))
        assert bins[10_100] == short_bins[10_100] == 1_000  # a bin not traced: 10 % of 10 ms, all short
        assert sum(gpu["bins_us"]) * 1000 == s.busy() - 0  # every ns of busy time is in a bin shown
    finally:
        s.close()


def test_an_estimate_is_clamped_to_the_bin(core: ctypes.CDLL) -> None:
    s = State(core, horizon_ns=100 * MS)
    core.fw_set_bins(s.buf, 10 * MS)
    try:
        t0 = 10_000 * 10 * MS
        core.fw_estimate(s.buf, 0, t0, t0 + 10 * MS, 3.0, 5.0)  # shares past 1 (a clock step): at most all
        core.fw_set_uuid(s.buf, 0, b"GPU-x")
        (gpu,) = s.json(now=t0 + 10 * MS)["gpus"]  # type: ignore[misc]
        assert gpu["estimated_ns"] == 10 * MS
        assert max(gpu["bins_us"]) == 10_000
    finally:
        s.close()
