"""A GPU's energy per sample, from the driver's cumulative counter and board power.

The counter is the truth but costs about 4.4 ms of CPU per read on an H200 (driver 580); board power
costs under 0.05 ms. So the agent reads the counter every `energy_interval` seconds and integrates
power in between: each sample gets a provisional energy (power x length), and when the counter is read
the window's measured energy replaces the provisional sum, shared over the window's samples in
proportion to their provisional energy. Totals stay exact at every counter read; with an energy
interval of one tick each sample is the counter's own delta.

When the counter goes backwards (driver reload) the window keeps its power integral and a reset is
counted. Where the driver has no counter, every sample is the power integral.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Commit:
    """Energy to commit for the samples of the window just closed.

    by="energy": share `total_j` over the window's samples in proportion to their provisional energy;
    by="time": in proportion to their length (the provisional sum was zero: no power reading).
    """

    total_j: float
    by: Literal["energy", "time"]
    reset: bool = False


class EnergyMeter:
    """Per GPU. Not thread-safe: the sampler calls it under its lock."""

    def __init__(self) -> None:
        self.base_mj: int | None = None
        self.window_j = 0.0
        self.window_s = 0.0
        self.last_power_w: float | None = None
        self.resets = 0

    def add_sample(self, dt_s: float, power_w: float | None) -> float:
        """Provisional energy of a sample of length dt_s ending now.

        NVML's board power on Ampere and later is an average over about the last second, so the reading
        at the end of a sample describes that sample; a missing reading reuses the last one.
        """
        if power_w is not None and power_w >= 0.0:
            self.last_power_w = power_w
        energy_j = (self.last_power_w or 0.0) * dt_s
        self.window_j += energy_j
        self.window_s += dt_s
        return energy_j

    def counter_read(self, counter_mj: int) -> Commit | None:
        """The driver's counter was read at the end of the latest sample: close the window."""
        base, self.base_mj = self.base_mj, counter_mj
        if base is None:  # first read: nothing measured yet, keep what power said
            return self._keep_provisional()
        if counter_mj < base:  # driver reload: the counter restarted
            self.resets += 1
            return self._keep_provisional(reset=True)
        if self.window_s <= 0.0:
            return None  # no sample since the last read: the counter cannot have moved for us
        measured_j = (counter_mj - base) / 1000.0
        by: Literal["energy", "time"] = "energy" if self.window_j > 0.0 else "time"
        self._clear()
        return Commit(measured_j, by)

    def no_counter(self) -> Commit | None:
        """Called every sample on a GPU without an energy counter: the power integral is the energy."""
        return self._keep_provisional()

    def abandon(self, counter_mj: int | None) -> Commit | None:
        """A gap in sampling: commit the open window as integrated, restart the counter's baseline."""
        commit = self._keep_provisional()
        self.base_mj = counter_mj
        return commit

    @property
    def open_samples(self) -> bool:
        return self.window_s > 0.0

    def _keep_provisional(self, reset: bool = False) -> Commit | None:
        if self.window_s <= 0.0:
            return Commit(0.0, "energy", reset=True) if reset else None
        commit = Commit(self.window_j, "energy" if self.window_j > 0.0 else "time", reset)
        self._clear()
        return commit

    def _clear(self) -> None:
        self.window_j = 0.0
        self.window_s = 0.0
