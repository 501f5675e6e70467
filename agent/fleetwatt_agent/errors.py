"""Named errors. NVML's codes map onto these so that callers test a class, not a number."""

from __future__ import annotations


class AgentError(Exception):
    """Base of the agent's own errors."""


class ConfigError(AgentError):
    """A flag or FLEETWATT_AGENT_* variable has a value the agent cannot use."""


class BackendUnavailable(AgentError):
    """The backend cannot start on this machine (no driver, no device, no trace): exit with one line."""


class ReplayFinished(AgentError):
    """The replay backend has played the whole trace."""


class TraceFormatError(AgentError):
    """A trace file is not a fleetwatt-agent trace, or a line of it is malformed."""


class NvmlError(AgentError):
    """An NVML call failed. `code` is NVML's return code."""

    code = -1

    def __init__(self, message: str = "", code: int | None = None) -> None:
        super().__init__(message or self.__class__.__name__)
        if code is not None:
            self.code = code


class NvmlUninitialized(NvmlError):
    code = 1


class NvmlInvalidArgument(NvmlError):
    code = 2


class NvmlNotSupported(NvmlError):
    code = 3


class NvmlNoPermission(NvmlError):
    code = 4


class NvmlNotFound(NvmlError):
    """On nvmlDeviceGetProcessUtilization: no sample since the given timestamp. Not a failure."""

    code = 6


class NvmlDriverNotLoaded(NvmlError):
    code = 9


class NvmlTimeout(NvmlError):
    code = 10


class NvmlLibraryNotFound(NvmlError):
    code = 12


class NvmlFunctionNotFound(NvmlError):
    code = 13


class NvmlGpuLost(NvmlError):
    code = 15


class NvmlUnknown(NvmlError):
    code = 999


_BY_CODE: dict[int, type[NvmlError]] = {
    cls.code: cls
    for cls in (
        NvmlUninitialized,
        NvmlInvalidArgument,
        NvmlNotSupported,
        NvmlNoPermission,
        NvmlNotFound,
        NvmlDriverNotLoaded,
        NvmlTimeout,
        NvmlLibraryNotFound,
        NvmlFunctionNotFound,
        NvmlGpuLost,
        NvmlUnknown,
    )
}


def nvml_error(code: int, message: str = "") -> NvmlError:
    """The named exception for an NVML return code (NvmlError itself for codes without a name)."""
    cls = _BY_CODE.get(code, NvmlError)
    return cls(message or f"NVML error {code}", code)
