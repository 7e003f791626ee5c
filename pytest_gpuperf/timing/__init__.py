"""Timing engine: backends that produce per-launch GPU times, and the adaptive sampler."""
from pytest_gpuperf.timing.backend import Prepared, TimingBackend
from pytest_gpuperf.timing.sampler import SamplingPolicy, compare, measure

__all__ = ["Prepared", "TimingBackend", "SamplingPolicy", "measure", "compare"]
