"""The exact GPU time of processes that run the opt-in injection library (agent/gputime/).

A process started with CUDA_INJECTION64_PATH naming libfleetwatt_gputime.so keeps, in the folder
--gpu-time-dir (FLEETWATT_GPUTIME_DIR for the process; /run/fleetwatt/gputime by default), one small
JSON file, rewritten every 200 ms: per GPU UUID the nanoseconds its kernels, copies and fills kept the
GPU busy so far (the union of their intervals, from CUPTI). This module finds a host PID's file and
reads that counter; the sampler turns counters into each sample's busy seconds (sampler.py).

A process in a container writes its own PID as its namespace sees it, so the file is named by the PID
namespace's inode and that PID (`<pidns>-<pid>.json`), both read here from /proc/<host pid>. The file
also names the process's start time (clock ticks since boot, /proc/<pid>/stat field 22), so a reused
PID never reads a dead process's counter, and it must belong to the process's own user (or root).
The counter is the job's own report: docs/agent.md ("Exact GPU time") says what a site trusts with it.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from fleetwatt_agent.backends.base import Backend, Resolver
from fleetwatt_agent.model import BackendInfo, TickReading

log = logging.getLogger(__name__)

FORMAT = "fleetwatt-gputime"
VERSION = 1
DEFAULT_DIR = "/run/fleetwatt/gputime"
# A file not rewritten for this long belongs to a process that is gone (it rewrites every 0.2 s).
STALE_S = 3600.0
# Files the library wrote at exit are removed once this old (the agent has read them by then).
FINAL_KEEP_S = 600.0
MAX_FILE_BYTES = 256 * 1024
# A state written later than now by more than this is not believed (the library writes CLOCK_REALTIME).
FUTURE_SLACK_NS = 10_000_000_000


@dataclass(frozen=True)
class GpuCounters:
    """One process's counters on one GPU: busy ns (the union of its work), its busiest kernels' ns, and
    its busy time per bin of the clock over the last seconds (µs per `bin_ns` from bin `bins_from`), as
    of `written_ns` (CLOCK_REALTIME); no bins from an older library. `bins_short_us`: of each bin's time,
    what lay in stretches too short to have held another context's time slice (empty from an older
    library: none known). `estimated_ns`: of `busy_ns`, the time not traced and counted at the busy share
    of the windows around it (a launch-bound process traced in windows; 0 where every kernel was)."""

    busy_ns: int
    kernels_ns: tuple[tuple[str, int], ...] = ()
    written_ns: int = 0
    bin_ns: int = 0
    bins_from: int = 0
    bins_us: tuple[int, ...] = ()
    bins_short_us: tuple[int, ...] = ()
    estimated_ns: int = 0


@dataclass(frozen=True)
class ProcessIdentity:
    pidns: int
    nspid: int
    start_ticks: int
    uid: int


class GpuTimeReader:
    """Reads the injection library's files for the host PIDs the driver lists."""

    def __init__(self, directory: str | Path, proc_root: str | Path = "/proc") -> None:
        self.directory = Path(directory)
        self.proc_root = Path(proc_root)
        self._identity: dict[int, ProcessIdentity | None] = {}
        self._swept = 0.0
        open_to_jobs(self.directory)

    def counters(self, pid: int) -> dict[str, GpuCounters] | None:
        """GPU UUID -> counters so far for host `pid`, or None when it keeps no valid file."""
        ident = self._identity.get(pid)
        if ident is None:
            ident = self._identify(pid)
            if ident is None:
                return None
        doc = self._read(ident)
        if doc is None:
            self._identity.pop(pid, None)  # a reused PID or a process that left: look again next time
            return None
        return doc

    def forget(self, live_pids: set[int]) -> None:
        """Drop what is known of PIDs the driver no longer lists; now and then remove stale files."""
        for pid in [p for p in self._identity if p not in live_pids]:
            del self._identity[pid]
        now = time.time()
        if now - self._swept >= 60.0:
            self._swept = now
            self._sweep(now)

    def _identify(self, pid: int) -> ProcessIdentity | None:
        base = self.proc_root / str(pid)
        try:
            pidns = os.stat(base / "ns" / "pid").st_ino
            uid = os.stat(base).st_uid
            status = (base / "status").read_text(encoding="utf-8", errors="replace")
            stat = (base / "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        nspid = pid
        for line in status.splitlines():
            if line.startswith("NSpid:"):
                fields = line.split()[1:]
                if fields and fields[-1].isdigit():
                    nspid = int(fields[-1])  # the innermost namespace's PID: the one the process knows
                break
        start = _start_ticks(stat)
        if start is None:
            return None
        ident = ProcessIdentity(pidns, nspid, start, uid)
        self._identity[pid] = ident
        return ident

    def _read(self, ident: ProcessIdentity) -> dict[str, GpuCounters] | None:
        """The process's state, if it is its own and written no later than now (by the node's clock)."""
        path = self.directory / f"{ident.pidns}-{ident.nspid}.json"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if st.st_uid not in (ident.uid, 0) or st.st_size > MAX_FILE_BYTES:
                return None  # another user's file under this name: never trusted
            raw = os.read(fd, MAX_FILE_BYTES)
        finally:
            os.close(fd)
        state = parse_state(raw, ident)
        now_ns = time.time_ns()
        if state is not None and any(c.written_ns > now_ns + FUTURE_SLACK_NS for c in state.values()):
            return None  # a state from the future would make every other file look stale (SharedTime)
        return state

    def _sweep(self, now: float) -> None:
        try:
            entries = list(os.scandir(self.directory))
        except OSError:
            return
        for entry in entries:
            if not entry.name.endswith(".json"):
                continue
            try:
                age = now - entry.stat(follow_symlinks=False).st_mtime
                if age > STALE_S or (age > FINAL_KEEP_S and _is_final(Path(entry.path))):
                    os.unlink(entry.path)
            except OSError:
                continue  # not ours to remove, or gone already


def open_to_jobs(directory: Path) -> None:
    """Make the folder writable by every user's jobs, sticky (each file stays its writer's), where the
    agent owns it (a hostPath the kubelet created 0755, say). Anything else is left as it is: the
    library says in one line on the job's stderr when it cannot write there."""
    try:
        st = os.stat(directory)
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != 0o1777:
            os.chmod(directory, 0o1777)
            log.info("%s made writable by every job (1777)", directory)
    except OSError:
        pass


def parse_state(raw: bytes, ident: ProcessIdentity | None = None) -> dict[str, GpuCounters] | None:
    """A state file's counters per GPU UUID, or None if it is not a valid state of `ident`."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        return None
    if ident is not None:
        if doc.get("pid") != ident.nspid or doc.get("pidns") != ident.pidns:
            return None
        start = doc.get("start_ticks")
        if start and ident.start_ticks and start != ident.start_ticks:
            return None  # the PID was reused: that file is a dead process's
    out: dict[str, GpuCounters] = {}
    gpus = doc.get("gpus")
    if not isinstance(gpus, list):
        return None
    for g in gpus:
        if not isinstance(g, dict):
            return None
        uuid, busy = g.get("uuid"), g.get("busy_ns")
        if not isinstance(uuid, str) or uuid in out or not _count(busy):
            return None  # a GPU without a UUID is "" and makes the whole process unsure (_on_gpu)
        kernels = []
        for k in g.get("kernels", []) if isinstance(g.get("kernels", []), list) else [None]:
            if not isinstance(k, list) or len(k) < 2 or not isinstance(k[0], str) or not _count(k[1]):
                return None
            kernels.append((k[0][:32], int(k[1])))
        bins, short = g.get("bins_us", []), g.get("bins_short_us", [])
        bin_ns, bins_from, written = g.get("bin_ns", 0), g.get("bins_from", 0), doc.get("written_ns", 0)
        estimated = g.get("estimated_ns", 0)
        if not isinstance(bins, list) or not isinstance(short, list) or (short and len(short) != len(bins)):
            return None
        if not all(_count(x) for x in [*bins, *short, bin_ns, bins_from, written, estimated]) or estimated > busy:
            return None
        out[uuid] = GpuCounters(
            int(busy), tuple(kernels), int(written), int(bin_ns), int(bins_from), tuple(bins), tuple(short), estimated
        )
    return out


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_final(path: Path) -> bool:
    """Whether the library wrote this file as its process exited."""
    try:
        doc = json.loads(path.read_bytes()[:MAX_FILE_BYTES])
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("final") is True


def _start_ticks(stat: str) -> int | None:
    """Field 22 of /proc/<pid>/stat; the command name (field 2) may hold spaces and parentheses."""
    tail = stat[stat.rfind(")") + 1 :].split()
    # tail[0] is field 3
    if len(tail) < 20 or not tail[19].isdigit():
        return None
    return int(tail[19])


# The library may still add time to its last second of bins (records that arrive late, a kernel that
# ends after a flush): the agent shares a bin among processes once it is this old in every file.
BINS_FINAL_NS = 1_200_000_000
# A file not rewritten for this long does not hold the others back (its process is stuck or gone).
BINS_STALE_NS = 3_000_000_000
# The final bins the share ratio of a process's time not yet final is taken over (1 s of 10 ms bins).
RATIO_BINS = 100
# At most this many bins are shared in one tick (the files show 3 s): older ones are left unshared,
# counted at the ratio with the time not yet final (an agent that slept, a file's odd clock).
MAX_WALK_BINS = 300


def share_bin(busy_us: list[int], bin_us: int, short_us: list[int] | None = None) -> list[int]:
    """Busy time of several processes in one bin of the clock, shared where they add up to more than
    the bin: without MPS one context runs at a time, so time that two processes' kernels both cover
    (time slicing puts one's kernel on hold while the other's runs) was one's or the other's.

    Time in stretches too short to have held another context's slice (`short_us`, of each `busy_us`:
    a launch-bound process's microsecond kernels) was run by its process, so it stays whole, and the
    stretches that cover it (the other's kernel on hold) give way. What is left of the bin is shared
    among the longer claims, the excess taken from each in equal parts, none below 0: the time a
    process alone covered stays its own, time covered by several is split among them."""
    if sum(busy_us) <= bin_us:
        return list(busy_us)
    if not short_us:
        return _equal_excess(busy_us, bin_us)
    short = [min(s, b) for s, b in zip(short_us, busy_us, strict=True)]
    kept = _equal_excess(short, bin_us)
    rest = _equal_excess([b - s for b, s in zip(busy_us, short, strict=True)], bin_us - sum(kept))
    return [k + r for k, r in zip(kept, rest, strict=True)]


def _equal_excess(busy_us: list[int], bin_us: int) -> list[int]:
    """`busy_us` cut to add up to at most `bin_us`, the excess taken from each in equal parts, none
    below 0 (water-filling)."""
    if sum(busy_us) <= bin_us:
        return list(busy_us)
    # the level x with sum(max(v - x, 0)) = bin_us: over the m largest values, x = (their sum - bin_us) / m
    ordered = sorted(busy_us, reverse=True)
    level, total = 0.0, 0
    for m, v in enumerate(ordered, start=1):
        total += v
        level = (total - bin_us) / m
        if m == len(ordered) or level >= ordered[m]:
            break
    return [int(max(v - level, 0.0)) for v in busy_us]  # down: never more than the bin


@dataclass
class _Account:
    """One process's GPU time on one GPU: `settled_ns` its shared time over the bins shared so far, of
    `claimed_ns` of its union counter those bins held (from the start: its counter before them, as is)."""

    settled_ns: float
    claimed_ns: float
    union_ns: int
    out_ns: int = 0
    last: GpuCounters | None = None  # its last state: its claims once it is gone
    recent: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=RATIO_BINS))

    def ratio(self) -> float:
        """What share_bin left it of what it claimed over its last final bins (1 where it claimed none)."""
        claimed = sum(c for _, c in self.recent)
        return sum(s for s, _ in self.recent) / claimed if claimed > 0 else 1.0


class SharedTime:
    """One GPU's processes' GPU time with the time they claim together shared (share_bin), as counters.

    The bins say what to share, but only once final, about a second late; the union counter says how
    busy each process was up to the last flush. So each process's counter is its time over the bins
    shared so far, exact, plus the rest of its union counter (the last second or so) times its recent
    share ratio, an estimate the next ticks replace with the bins' word. Alone, a process keeps its
    whole union counter at once (its power learned alone is not skewed); shared, the estimate errs for
    about a second and is then settled, so no error adds up over a run. The counters never go back
    (the sampler reads their rises): an estimate that was too high holds the counter until the time
    shared catches up. A process first seen counts its whole counter, as the union does.
    A process that leaves the GPU (the driver no longer lists it) still claims its bins not shared yet:
    its last state (`gone`: its file read once more as it leaves, written as it exited; else the last
    one read) stays in the sharing until those bins are shared, so that the processes left do not get
    the whole of the time they claimed with it in its last second.
    `counters` returns None while a process on the GPU keeps no bins (an older library): then the
    union counters stand for every process, so that all are read the same way."""

    def __init__(self) -> None:
        self.done_bin: int | None = None
        self.accounts: dict[int, _Account] = {}
        self.gone: dict[int, GpuCounters] = {}  # processes gone from the GPU whose bins are not all shared

    def leaving(self, present: Iterable[int]) -> list[int]:
        """The processes counted so far that are not among `present` (their last state is wanted)."""
        here = set(present)
        return [pid for pid in self.accounts if pid not in here]

    def counters(
        self, counters: Mapping[int, GpuCounters], gone: Mapping[int, GpuCounters | None] | None = None
    ) -> dict[int, int] | None:
        if not counters or any(not c.bins_us or c.bin_ns <= 0 for c in counters.values()):
            return None
        bin_ns = next(iter(counters.values())).bin_ns
        if any(c.bin_ns != bin_ns for c in counters.values()):
            return None
        for pid in self.leaving(counters):
            acct = self.accounts.pop(pid)
            last = (gone or {}).get(pid) or acct.last
            if last is not None and last.bin_ns == bin_ns and last.bins_us:
                self.gone[pid] = last
        for pid in [p for p in self.gone if p in counters]:
            del self.gone[pid]  # listed again: counted afresh below
        final_bin = self._advance(counters, bin_ns)
        for pid, c in counters.items():
            acct = self.accounts.get(pid)
            if acct is None or c.busy_ns < acct.union_ns:  # first seen (or a counter that went back)
                before = max(c.busy_ns - _unshared_ns(c, self.done_bin, bin_ns), 0)
                self.accounts[pid] = _Account(float(before), float(before), c.busy_ns)
        self._share_final_bins(counters, bin_ns, final_bin)
        out: dict[int, int] = {}
        for pid, c in counters.items():
            acct = self.accounts[pid]
            acct.union_ns = c.busy_ns
            acct.last = c
            estimate = acct.settled_ns + max(c.busy_ns - acct.claimed_ns, 0.0) * acct.ratio()
            acct.out_ns = max(acct.out_ns, int(estimate))
            out[pid] = acct.out_ns
        return out

    def ratio(self, pid: int) -> float:
        acct = self.accounts.get(pid)
        return acct.ratio() if acct is not None else 1.0

    def _advance(self, counters: Mapping[int, GpuCounters], bin_ns: int) -> int:
        """The last bin final in every fresh file; `done_bin` moved past bins the files no longer hold
        and past those a tick may not walk (they stay unshared: counted at the ratio)."""
        newest = max(c.written_ns for c in counters.values())
        fresh = [c for c in counters.values() if newest - c.written_ns <= BINS_STALE_NS]
        final_bin = min(c.written_ns - BINS_FINAL_NS for c in fresh) // bin_ns
        oldest_known = max(c.bins_from for c in counters.values())
        if self.done_bin is None:
            self.done_bin = oldest_known - 1
        self.done_bin = max(self.done_bin, oldest_known - 1, final_bin - MAX_WALK_BINS)
        return final_bin

    def _share_final_bins(self, counters: Mapping[int, GpuCounters], bin_ns: int, final_bin: int) -> None:
        """Share each bin once final in every fresh file, in clock order, with the claims of the
        processes gone whose bins reach it (their part is theirs, counted for nobody)."""
        assert self.done_bin is not None
        pids = list(counters)
        files = [counters[pid] for pid in pids] + list(self.gone.values())
        bin_us = bin_ns // 1000
        for b in range(self.done_bin + 1, final_bin + 1):
            claimed = [_claimed_us(c, b, bin_us) for c in files]
            short = [_claimed_us(c, b, bin_us, short=True) for c in files]
            shares = share_bin(claimed, bin_us, short)[: len(pids)]  # the processes present first, then those gone
            for pid, got, want in zip(pids, shares, claimed[: len(pids)], strict=True):
                acct = self.accounts[pid]
                acct.settled_ns += got * 1000
                acct.claimed_ns += want * 1000
                acct.recent.append((got, want))
        self.done_bin = max(self.done_bin, final_bin)
        for pid in [p for p, c in self.gone.items() if c.bins_from + len(c.bins_us) - 1 <= self.done_bin]:
            del self.gone[pid]  # every bin it claimed is shared


def _claimed_us(c: GpuCounters, b: int, bin_us: int, *, short: bool = False) -> int:
    bins = c.bins_short_us if short else c.bins_us
    i = b - c.bins_from
    return min(bins[i], bin_us) if 0 <= i < len(bins) else 0


def _unshared_ns(c: GpuCounters, done_bin: int | None, bin_ns: int) -> int:
    """The busy ns a process's file shows in bins not shared yet (after `done_bin`)."""
    bin_us = bin_ns // 1000
    first = 0 if done_bin is None else max(done_bin + 1 - c.bins_from, 0)
    return sum(min(us, bin_us) for us in c.bins_us[first:]) * 1000


class GpuTimeBackend:
    """A backend whose readings carry each process's GPU-time counter where it keeps one.

    Wraps the hardware backend (NVML, DRM), so that the counters are recorded in traces with the rest
    of the reading and a replay plays them back without this reader."""

    def __init__(self, inner: Backend, reader: GpuTimeReader) -> None:
        self.inner = inner
        self.reader = reader
        self.name = inner.name
        self.self_paced = inner.self_paced
        self._uuids: dict[int, str] = {}
        self._shared: dict[int, SharedTime] = {}  # per GPU index

    def open(self) -> BackendInfo:
        info = self.inner.open()
        self._uuids = {g.index: g.uuid for g in info.gpus}
        extra = dict(info.extra)
        extra["gpu_time_dir"] = str(self.reader.directory)
        return replace(info, extra=extra)

    def read(self, *, read_energy: bool) -> TickReading:
        reading = self.inner.read(read_energy=read_energy)
        return with_gpu_time(reading, self._uuids, self.reader, self._shared)

    def resolver(self) -> Resolver | None:
        return self.inner.resolver()

    def close(self) -> None:
        self.inner.close()


def with_gpu_time(
    reading: TickReading,
    uuids: Mapping[int, str],
    reader: GpuTimeReader,
    shared: dict[int, SharedTime] | None = None,
) -> TickReading:
    """The reading with each listed process's GPU-time counters on its GPU (None where it keeps none):
    `gpu_busy_ns` the time it had with the time processes claim together shared (SharedTime, where every
    process on the GPU keeps bins), else the union of its work; `gpu_busy_raw_ns` always the union."""
    counters: dict[int, dict[str, GpuCounters] | None] = {}
    gpus = []
    for g in reading.gpus:
        uuid = uuids.get(g.index, "")
        mine: dict[int, GpuCounters | None] = {}
        for p in g.processes:
            if p.pid not in counters:
                counters[p.pid] = reader.counters(p.pid)
            mine[p.pid] = _on_gpu(counters[p.pid], uuid)
        known = {pid: c for pid, c in mine.items() if c is not None}
        sharing = shared.setdefault(g.index, SharedTime()) if shared is not None else None
        busy = None
        if sharing is not None and len(known) == len(mine):
            # a process that just left: its file once more (written as it exited), before it is forgotten
            gone = {pid: _on_gpu(reader.counters(pid), uuid) for pid in sharing.leaving(known)}
            busy = sharing.counters(known, gone)
        procs = []
        for p in g.processes:
            c = mine[p.pid]
            procs.append(
                replace(
                    p,
                    gpu_busy_ns=(busy[p.pid] if busy is not None else c.busy_ns) if c else None,
                    gpu_kernels_ns=c.kernels_ns if c else None,
                    gpu_busy_raw_ns=c.busy_ns if c else None,
                    gpu_busy_estimated_ns=c.estimated_ns if c else None,
                )
            )
        gpus.append(replace(g, processes=tuple(procs)))
    reader.forget(set(counters))
    return replace(reading, gpus=tuple(gpus))


def _on_gpu(counters: Mapping[str, GpuCounters] | None, uuid: str) -> GpuCounters | None:
    """A process's counters on the GPU `uuid`: 0 where it keeps a file but ran nothing there yet; None
    where it keeps none, or where the library could not name one of its GPUs (then no GPU's 0 is sure)."""
    if counters is None or not uuid or "" in counters:
        return None
    return counters.get(uuid, GpuCounters(0))
