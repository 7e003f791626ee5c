"""Options, their ini and environment twins, and one precedence: marker > command line > environment > ini.

Every setting is declared once here; the command-line flag, ini key, environment variable
and ``@pytest.mark.gpu_perf(...)`` keyword are derived from that one declaration, and a bad
value raises an error that names where it came from.
"""

from __future__ import annotations

import argparse
import fnmatch
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf.errors import GpuPerfUsageError

if TYPE_CHECKING:
    from pytest_gpuperf._gates.verdict import Bands
    from pytest_gpuperf._timing.results import CacheMode


ENV_PREFIX = "GPU_PERF_"
MARKER = "gpu_perf"
FULL_MARKER = "gpu_perf_full"  # a perf test of the full tier: run with --gpu-perf-full
GPU_MARKER = "gpu_perf_for"  # settings for the GPUs whose baseline folder name matches a pattern


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def _bool(text: Any) -> bool:
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS + ("",):
        return False
    raise ValueError("expected true/false (1/0, yes/no, on/off)")


def _fraction(low: float, high: float) -> Callable[[Any], float]:
    def parse(text: Any) -> float:
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise ValueError(f"expected a number between {low:g} and {high:g}") from None
        if not low < value < high:
            raise ValueError(f"expected a number between {low:g} and {high:g} (exclusive)")
        return value

    return parse


def _fraction_or_zero(text: Any) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError("expected a number from 0 up to 1") from None
    if not 0 <= value < 1:
        raise ValueError("expected a number from 0 up to 1 (exclusive)")
    return value


def _positive(text: Any) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError("expected a positive number") from None
    if not value > 0:
        raise ValueError("expected a positive number")
    return value


def _non_negative(text: Any) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError("expected a number of seconds, 0 or more") from None
    if not 0 <= value < math.inf:  # an endless wait for a GPU another process keeps busy hangs the run
        raise ValueError("expected a finite number of seconds, 0 or more")
    return value


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(text: Any) -> str:
        value = str(text).strip().lower()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return value

    return parse


def _device(text: Any) -> str:
    value = str(text).strip().lower()
    if value == "auto" or (value.isdigit() and int(value) >= 0):
        return value
    raise ValueError("expected 'auto' or a CUDA device ordinal (0, 1, ...)")


def _arch_list(text: Any) -> tuple[str, ...]:
    """Architectures in any spelling the markers accept ('sm80', 'sm_80', '8.0', 'sm_90a'),
    normalised to nvcc's ('sm_80', 'sm_90a')."""
    from pytest_gpuperf._plugin.arch import parse_arch

    values = [v.strip().lower() for v in str(text).split(",") if v.strip()]
    if not values:
        raise ValueError("expected comma-separated architectures such as sm_80,sm_90 (or 'all')")
    out = []
    for v in values:
        if v == "all":
            out.append(v)
            continue
        suffix = v[-1] if v[-1] in "af" and not v[-2:].isdigit() else ""
        try:
            (major, minor), _ = parse_arch(v)
        except ValueError as exc:
            raise ValueError(f"{exc}; expected comma-separated architectures such as sm_80,sm_90 (or 'all')") from None
        out.append(f"sm_{major}{minor}{suffix}")
    return tuple(out)


def _path(text: Any) -> str:
    value = str(text).strip()
    if not value:
        raise ValueError("expected a path")
    return value


def _file_path(text: Any) -> str:
    value = _path(text)
    if value.endswith(("/", os.sep)):
        raise ValueError(f"expected the path of a file to write, and this one names a folder (e.g. {value}report.json)")
    return value


def _path_list(text: Any) -> tuple[str, ...]:
    """Paths or globs separated by commas (or given as a list in an ini file)."""
    items = text if isinstance(text, (list, tuple)) else str(text).split(",")
    return tuple(str(item).strip() for item in items if str(item).strip())


@dataclass(frozen=True)
class Setting:
    """One setting: ``name`` gives ``--gpu-perf-<name>``, ini ``gpu_perf_<name>``, env ``GPU_PERF_<NAME>``."""

    name: str
    help: str
    parse: Callable[[Any], Any]
    default: Any
    flag_only: bool = False  # a boolean command-line switch
    per_test: bool = False  # may be set by @pytest.mark.gpu_perf(...)
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return "gpu_perf_" + self.name.replace("-", "_") if self.name else "gpu_perf"

    @property
    def flag(self) -> str:
        return "--gpu-perf" + (f"-{self.name}" if self.name else "")

    @property
    def no_flag(self) -> str:
        """The switch that turns a ``flag_only`` setting off: ``--no-gpu-perf``."""
        return "--no-" + self.flag[2:]

    @property
    def ini(self) -> str:
        return self.dest

    @property
    def env(self) -> str:
        return ENV_PREFIX.rstrip("_") if not self.name else ENV_PREFIX + self.name.replace("-", "_").upper()

    @property
    def keyword(self) -> str:
        return self.name.replace("-", "_")


HELP_ENABLE = "Time GPU kernels and apply performance gates; without it, perf tests are skipped."
SETTINGS: tuple[Setting, ...] = (
    Setting("", HELP_ENABLE, _bool, False, flag_only=True),
    Setting(
        "update-baselines",
        "Re-record the stored baselines of the GPU in use (e.g. after a hardware change); regressions do not fail.",
        _bool,
        False,
        flag_only=True,
    ),
    Setting(
        "baselines",
        "Folder of stored per-GPU baselines (default: baselines/ under the rootdir); a folder named here must "
        "exist, unless --gpu-perf-update-baselines creates it.",
        _path,
        "baselines",
        metavar="DIR",
    ),
    Setting(
        "device",
        "CUDA device to test on: an ordinal, or 'auto' (one GPU per xdist worker).",
        _device,
        "auto",
        metavar="N",
    ),
    Setting("json", "Write the machine-readable JSON report to this path.", _file_path, None, metavar="PATH"),
    Setting(
        "tolerance",
        "Slowdown vs the stored baseline that the regression gate is built to catch (0.05 = 5%).",
        _fraction(0.0, 1.0),
        0.05,
        per_test=True,
        metavar="FRACTION",
    ),
    Setting(
        "machine-noise",
        "Band for regression checks that compare raw times (no reference kernel timed with both runs): a "
        "slowdown smaller than this is never a failure (0.05 = 5%: the same kernels moved by up to 4.7% "
        "between physical H200s).",
        _fraction_or_zero,
        0.05,
        per_test=True,
        metavar="FRACTION",
    ),
    Setting(
        "calibrated-noise",
        "Band for regression checks that compare times relative to a reference kernel timed in the same "
        "rounds (calibrated): what calibration leaves of a machine's difference, since chips of one model "
        "move a kernel and its reference by different amounts (0.04 = 4%: up to 2.8% for 99% of kernels "
        "across H100s and H200s).",
        _fraction_or_zero,
        0.04,
        per_test=True,
        metavar="FRACTION",
    ),
    Setting(
        "level-noise",
        "Band for regression checks against a baseline that stores levels (gpuperf levels: a kernel "
        "that holds one of a few calibrated times per run): a run that sits within this of a level, its "
        "interval as narrow, passes; one further than this from every level and slower than one fails "
        "(0.03 = 3%).",
        _fraction_or_zero,
        0.03,
        per_test=True,
        metavar="FRACTION",
    ),
    Setting(
        "confidence",
        "Confidence level of every interval and gate.",
        _fraction(0.5, 1.0),
        0.99,
        per_test=True,
        metavar="LEVEL",
    ),
    Setting(
        "precision",
        "Stop sampling when the median's interval half-width is within this fraction (0.005 = 0.5%).",
        _fraction(0.0, 1.0),
        0.005,
        per_test=True,
        metavar="FRACTION",
    ),
    Setting(
        "budget",
        "Seconds of timing per measurement or claim before sampling stops; an undecided one is extended "
        "to three times this. Verdicts are reached on at least min(1 s, budget) of data: a shorter budget "
        "cannot see a kernel's own level that holds longer.",
        _positive,
        1.0,
        per_test=True,
        metavar="SECONDS",
    ),
    Setting(
        "inconclusive",
        "What an undecided result does to its test: an INCONCLUSIVE speedup claim (after re-sampling), an "
        "INCONCLUSIVE regression check against a stored baseline or against --gpu-perf-against's revision, and a "
        "measurement contended by other processes on the GPU. warn: the test passes (a contended one is skipped) "
        "with a warning, and the summary lists each with its reason; fail: the test fails, and so does the run "
        "(exit status 1).",
        _choice("warn", "fail"),
        "warn",
        per_test=True,
        metavar="{warn,fail}",
    ),
    Setting(
        "breakdown",
        "Per-kernel breakdowns (each kernel a launch runs: name, grid, block, shared memory, registers, its own "
        "time), taken after the verdict so they never perturb the timed samples. auto: for every check that "
        "fails or is INCONCLUSIVE, and stored with each baseline --gpu-perf-update-baselines records; all: for "
        "every measurement too; off: none.",
        _choice("auto", "all", "off"),
        "auto",
        per_test=True,
        metavar="{auto,all,off}",
    ),
    Setting(
        "binaries",
        "Binaries to search first for the kernel a failing check names (cubins, fatbins, shared libraries, or "
        "folders of them; globs allowed; comma-separated, relative to the rootdir), before the plugin's build "
        "caches and CuPy's, Triton's and torch's.",
        _path_list,
        (),
        metavar="PATHS",
    ),
    Setting(
        "missing-baseline",
        "When this GPU has no stored baseline for a variant: pass (and say how to record one), skip, or fail.",
        _choice("pass", "skip", "fail"),
        "pass",
        per_test=True,
        metavar="{pass,skip,fail}",
    ),
    Setting(
        "cache",
        "cold: every launch finds its inputs outside L2: by rotating the variant's input copies (rotations=), "
        "by nothing when one launch moves at least 4x the L2 size, else by writing a buffer twice the L2 size "
        "before each launch and subtracting an interleaved graph of those writes alone; hot: back-to-back "
        "launches (inputs may stay in L2).",
        _choice("cold", "hot"),
        "cold",
        per_test=True,
        metavar="{cold,hot}",
    ),
    Setting(
        "static-archs",
        "Architectures the compile-time tier (gpu_static fixture) builds for; sm_90 also selects sm_90a. No GPU needed.",
        _arch_list,
        ("sm_80", "sm_90"),
        metavar="ARCHS",
    ),
    # Hardware counters (issue 7): their own switch, not implied by --gpu-perf. Counters need
    # no timing and hardly vary, so a counters-only job can run without timing; but each
    # profile runs ncu (seconds per launch, kernels replayed once per counter pass), which
    # plain and timing runs should not pay for.
    Setting(
        "counters",
        "Run hardware-counter tests (gpu_counters fixture) through Nsight Compute's ncu; without it they are skipped.",
        _bool,
        False,
        flag_only=True,
    ),
    Setting(
        "calibrate",
        "Time a reference kernel (a device copy, or a tensor-core GEMM for compute-bound work) in the same "
        "rounds as every checked variant, store the ratio with baselines and compare ratios, so a faster or "
        "slower machine or clock level cancels; off compares raw times (faster, machine-sensitive).",
        _bool,
        True,
        per_test=True,
        metavar="{on,off}",
    ),
    Setting(
        "against",
        "Also build each perf test's variants from this git revision (or another checkout's folder) and "
        "time each variant interleaved with its namesake from there: the regression check compares the two "
        "in the same rounds, so the machine cancels (e.g. a pull request's merge base).",
        _path,
        None,
        metavar="REV",
    ),
    Setting(
        "changed-only",
        "With --gpu-perf-against: a perf test whose every variant is proven the same GPU work as at REV (same "
        "code, launch configuration and parameter bytes, read from captured graphs) is not timed and passes, "
        "saying so; anything not proven is timed, with the reason.",
        _bool,
        False,
        flag_only=True,
    ),
    Setting(
        "require-health",
        "Fail a measurement whose clocks and throttling cannot be read (NVML missing) instead of noting it.",
        _bool,
        False,
        flag_only=True,
    ),
    Setting(
        "quiet-wait",
        "Seconds (a finite number) the whole run may wait for other processes to stop using the GPU before "
        "measuring anyway; a measurement they share is reported as contended, never judged or stored.",
        _non_negative,
        60.0,
        metavar="SECONDS",
    ),
    Setting(
        "only",
        "Run only the performance tests (those using the gpu_perf fixture or marker); deselect the rest.",
        _bool,
        False,
        flag_only=True,
    ),
    Setting(
        "gpu-only",
        "Run only the tests that use the GPU (perf tests, tests using the gpuperf_device or gpu_counters "
        "fixture or an architecture marker); deselect the rest, e.g. in a GPU job after a CPU job that ran them.",
        _bool,
        False,
        flag_only=True,
    ),
    Setting(
        "full",
        "Also run the perf tests marked gpu_perf_full (a project's full grid, e.g. for a nightly job); "
        "without it they are skipped with that reason. --gpu-perf-update-baselines runs them too, so "
        "every stored baseline is re-recorded together.",
        _bool,
        False,
        flag_only=True,
    ),
    Setting(
        "plots",
        "Write one chart per kernel family and an index.html into this folder after the run (needs matplotlib).",
        _path,
        None,
        metavar="DIR",
    ),
)
BY_NAME: Mapping[str, Setting] = {s.name: s for s in SETTINGS}
PER_TEST_KEYWORDS: Mapping[str, Setting] = {s.keyword: s for s in SETTINGS if s.per_test}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpu-perf", "GPU kernel performance gates (pytest-gpuperf)")
    for s in SETTINGS:
        cli_help = (s.help + f" [{_type_and_default(s)}; env {s.env}, ini {s.ini}]").replace(
            "%", "%%"
        )  # argparse formats help
        if s.flag_only:
            group.addoption(s.flag, action="store_const", const=True, default=None, dest=s.dest, help=cli_help)
            group.addoption(
                s.no_flag,
                action="store_const",
                const=False,
                dest=s.dest,
                help=f"Turn {s.flag} off, whatever {s.env} or the ini key {s.ini} say.",
            )
            # --gpu-perf=0 and the like: argparse matches a whole option string before it splits
            # at '=', so each spelling is an alias; a flag taking an optional value instead
            # would swallow the test path that follows it (pytest --gpu-perf tests/).
            for const, words in ((True, TRUE_WORDS), (False, FALSE_WORDS)):
                spellings = [f"{s.flag}={w}" for w in (*words, *(w.capitalize() for w in words if w.isalpha()))]
                group.addoption(*spellings, action="store_const", const=const, dest=s.dest, help=argparse.SUPPRESS)
        else:
            group.addoption(s.flag, action="store", default=None, dest=s.dest, metavar=s.metavar, help=cli_help)
        parser.addini(s.ini, help=f"{s.help} [{_type_and_default(s)}]", default=None)


def _type_and_default(s: Setting) -> str:
    """'number, default 0.05' for --help: the ini keys all read as strings, so say what they take."""
    kinds: dict[Callable[[Any], Any], str] = {
        _bool: "true/false",
        _path: "path",
        _file_path: "path",
        _positive: "number",
        _non_negative: "seconds",
        _device: "ordinal or auto",
    }
    if s.parse is _bool and not s.flag_only:
        kind = "on/off"  # a value, not a switch: --gpu-perf-calibrate=off (no --no- form)
    else:
        kind = kinds.get(s.parse) or (
            "architectures" if s.parse is _arch_list else "paths" if s.parse is _path_list else s.metavar or "number"
        )
    if isinstance(s.default, tuple):
        default = ",".join(s.default) or "none"
    elif s.default is None:
        default = "none"
    elif isinstance(s.default, bool):
        default = "on" if s.default else "off"
    else:
        default = f"{s.default:g}" if isinstance(s.default, float) else str(s.default)
    return f"{kind}, default {default}"


def _invalid(setting: Setting, raw: Any, source: str, exc: ValueError) -> GpuPerfUsageError:
    return GpuPerfUsageError(f"pytest-gpuperf: invalid value {raw!r} for {setting.ini} from {source}: {exc}")


def resolve(config: pytest.Config, setting: Setting) -> tuple[Any, str]:
    """The session-wide value of ``setting`` and where it came from (CLI > env > ini > default)."""
    raw = config.getoption(setting.dest)
    if raw is not None:
        source = f"the command line ({setting.no_flag if raw is False and setting.flag_only else setting.flag})"
    elif os.environ.get(setting.env) not in (None, ""):
        raw = os.environ[setting.env]
        source = f"the environment variable {setting.env}"
    elif config.getini(setting.ini) not in (None, ""):
        raw = config.getini(setting.ini)
        where = config.inipath.name if config.inipath else "the ini file"
        source = f"the ini file ({where}, key {setting.ini})"
    else:
        return setting.default, "the default"
    try:
        return setting.parse(raw), source
    except ValueError as exc:
        raise _invalid(setting, raw, source, exc) from None


@dataclass(frozen=True)
class Settings:
    """Resolved session settings; ``for_test`` applies a test's marker on top."""

    enabled: bool
    update_baselines: bool
    baselines_dir: Path
    device: str
    json_path: Path | None
    tolerance: float
    machine_noise: float
    confidence: float
    precision: float
    budget: float
    inconclusive: str
    missing_baseline: str
    cache: CacheMode
    sources: Mapping[str, str]
    static_archs: tuple[str, ...] = ("sm_80", "sm_90")
    counters: bool = False
    plots_dir: Path | None = None
    require_health: bool = False
    quiet_wait: float = 60.0
    calibrate: bool = True
    against: str | None = None
    changed_only: bool = False
    calibrated_noise: float = 0.04
    level_noise: float = 0.03
    only: bool = False
    gpu_only: bool = False
    full: bool = False
    breakdown: str = "auto"
    binaries: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for s in SETTINGS:
            values[s.name], sources[s.name] = resolve(config, s)
        return cls(
            enabled=values[""],
            update_baselines=values["update-baselines"],
            baselines_dir=_anchor(config, values["baselines"], sources["baselines"]),
            device=values["device"],
            json_path=_anchor(config, values["json"], sources["json"]) if values["json"] else None,
            tolerance=values["tolerance"],
            machine_noise=values["machine-noise"],
            confidence=values["confidence"],
            precision=values["precision"],
            budget=values["budget"],
            inconclusive=values["inconclusive"],
            missing_baseline=values["missing-baseline"],
            cache=values["cache"],
            sources=sources,
            static_archs=values["static-archs"],
            counters=values["counters"],
            plots_dir=_anchor(config, values["plots"], sources["plots"]) if values["plots"] else None,
            require_health=values["require-health"],
            calibrate=values["calibrate"],
            against=values["against"],
            changed_only=values["changed-only"],
            calibrated_noise=values["calibrated-noise"],
            level_noise=values["level-noise"],
            only=values["only"],
            gpu_only=values["gpu-only"],
            full=values["full"],
            quiet_wait=values["quiet-wait"],
            breakdown=values["breakdown"],
            binaries=tuple(str(config.rootpath / b) for b in values["binaries"]),
        )

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON values of their own types (paths as strings, tuples as lists)."""
        from dataclasses import fields

        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "sources":
                value = dict(value)
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    def check_paths(self) -> None:
        """Paths given by options must be usable as what they name, checked before any test runs; a
        baselines folder given explicitly must exist unless the run records baselines (which creates it)."""
        checks = (
            ("baselines", self.baselines_dir, "a folder", lambda p: not p.exists() or p.is_dir()),
            ("json", self.json_path, "a file", lambda p: not p.is_dir()),
            ("plots", self.plots_dir, "a folder", lambda p: not p.exists() or p.is_dir()),
        )
        for name, path, kind, usable in checks:
            if path is not None and not usable(path):
                raise GpuPerfUsageError(
                    f"pytest-gpuperf: {BY_NAME[name].flag} {path} (from {self.sources.get(name, 'the default')}) "
                    f"must name {kind}, and it is not; give another path"
                )
        self._require_baselines_folder()

    def _require_baselines_folder(self) -> None:
        """A baselines folder named explicitly must exist: a mistyped path would otherwise turn every
        regression check into a "no stored baseline" note. An update creates it."""
        path, source = self.baselines_dir, self.sources.get("baselines", "the default")
        if path.is_dir():
            return
        flag = BY_NAME["baselines"].flag
        if self.update_baselines:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise GpuPerfUsageError(
                    f"pytest-gpuperf: {flag} {path} (from {source}) cannot be created: {exc.strerror or exc}; "
                    "give another path"
                ) from None
        elif source != "the default":
            raise GpuPerfUsageError(
                f"pytest-gpuperf: {flag} {path} (from {source}) does not exist, so no baseline would be checked; "
                "fix the path, or record baselines there with --gpu-perf-update-baselines"
            )

    @property
    def bands(self) -> Bands:
        from pytest_gpuperf._gates.verdict import Bands  # lazily: gates load numpy

        return Bands(self.machine_noise, self.calibrated_noise, self.level_noise)

    def for_test(self, item: pytest.Item, device_key: str | None = None) -> Settings:
        """Apply ``@pytest.mark.gpu_perf(...)`` keywords (the closest marker wins), then those of
        every ``@pytest.mark.gpu_perf_for(PATTERN, ...)`` whose PATTERN (fnmatch, lowercased, as
        folder names are) matches ``device_key``, the GPU's baseline folder name: on such a GPU a
        gpu_perf_for keyword wins over gpu_perf's wherever either is placed. Unknown keywords and
        malformed markers are an error naming the test, with or without a device."""
        overrides: dict[str, Any] = {}
        for mark in reversed(list(item.iter_markers(MARKER))):  # closest marker wins
            if mark.args:
                raise GpuPerfUsageError(
                    f"{item.nodeid}: @pytest.mark.{MARKER} takes keyword arguments only "
                    f"({', '.join(PER_TEST_KEYWORDS)}), got positional {mark.args!r}"
                )
            overrides.update(_parse_keywords(item, MARKER, mark.kwargs))
        for mark in reversed(list(item.iter_markers(GPU_MARKER))):
            if len(mark.args) != 1 or not isinstance(mark.args[0], str) or not mark.args[0]:
                raise GpuPerfUsageError(
                    f"{item.nodeid}: @pytest.mark.{GPU_MARKER} takes one pattern of baseline folder names "
                    f"(e.g. 'nvidia-h200-*') and keywords, got positional {mark.args!r}"
                )
            parsed = _parse_keywords(item, GPU_MARKER, mark.kwargs)
            if device_key is not None and fnmatch.fnmatchcase(device_key, mark.args[0].lower()):
                overrides.update(parsed)
        if not overrides:
            return self
        from dataclasses import replace

        return replace(self, **overrides)


def _parse_keywords(item: pytest.Item, marker: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for key, raw in kwargs.items():
        setting = PER_TEST_KEYWORDS.get(key)
        if setting is None:
            raise GpuPerfUsageError(
                f"{item.nodeid}: unknown keyword {key!r} in @pytest.mark.{marker}; "
                f"expected one of {', '.join(sorted(PER_TEST_KEYWORDS))}"
            )
        try:
            parsed[key] = setting.parse(raw)
        except ValueError as exc:
            raise _invalid(setting, raw, f"@pytest.mark.{marker} on {item.nodeid}", exc) from None
    return parsed


def _anchor(config: pytest.Config, value: str, source: str) -> Path:
    """Command-line paths are relative to where pytest was invoked; the rest to the rootdir."""
    path = Path(os.path.expanduser(value))
    if path.is_absolute():
        return path
    base = config.invocation_params.dir if source.startswith("the command line") else config.rootpath
    return Path(base) / path
