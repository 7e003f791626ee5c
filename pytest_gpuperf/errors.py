"""Errors the plugin raises; each message says what is wrong and how to fix it."""

from __future__ import annotations

__all__ = [
    "GpuPerfError",
    "GpuPerfUsageError",
    "BaselineFileError",
    "GateFailure",
    "GpuContended",
    "InvalidSample",
    "UnsafePathError",
    "LockTimeoutError",
]


class GpuPerfError(Exception):
    """A measurement could not be made (CUDA error, bad callable, unusable device)."""


class InvalidSample(GpuPerfError):
    """A timing sample that is not a finite, positive time."""

    def __init__(self, message: str, variant: str, value: float):
        super().__init__(message)
        self.variant = variant
        self.value = value


class GpuContended(GpuPerfError):
    """Other processes used the GPU while it was measured, and the measurement could not be made."""


class GpuPerfUsageError(GpuPerfError):
    """A bad option, ini value, environment variable or marker argument."""


class BaselineFileError(GpuPerfError):
    """A stored baseline file is unreadable, corrupt or of another schema."""


class GateFailure(AssertionError):
    """A performance gate failed: a speedup below its margin, or a regression."""


class UnsafePathError(GpuPerfError):
    """A path the plugin will not use: a symlink where following it could write elsewhere, a
    cache folder another user owns or can write, or a name nvcc's shell would execute."""


class LockTimeoutError(GpuPerfError):
    """A file lock was not acquired in time; the message names the lock file and its holder."""
