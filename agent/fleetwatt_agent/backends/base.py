"""The one small interface every backend implements."""

from __future__ import annotations

from typing import Protocol

from fleetwatt_agent.model import BackendInfo, JobInfo, TickReading


class Resolver(Protocol):
    def resolve(self, pid: int) -> JobInfo:
        """The job a driver-listed PID belongs to (never fails: a plain process is a job too)."""
        ...


class Backend(Protocol):
    name: str
    # True when read() paces itself (replay); otherwise the sampler ticks on its own schedule.
    self_paced: bool

    def open(self) -> BackendInfo:
        """Start; raise BackendUnavailable with a one-line reason when this machine cannot."""
        ...

    def read(self, *, read_energy: bool) -> TickReading:
        """One reading of every GPU. `read_energy`: also read the (expensive) energy counter."""
        ...

    def resolver(self) -> Resolver | None:
        """A resolver of its own (replay plays the recorded jobs), or None to use /proc discovery."""
        ...

    def close(self) -> None: ...
