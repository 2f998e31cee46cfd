"""Metrics: a CSV + TensorBoard sink, a live progress display, and a CPU utilisation probe.

A write that fails (a full disk, a read-only folder) is raised once, from `MetricsSink.log` or
`flush`, as an OSError naming the file (the trainer turns it into its one-line error with the commit
kept); closing the sink afterwards does not raise again, and TensorBoard's writer thread does not
print its own traceback (the sink raises the thread's error in the caller's thread).

The sink also hands every row to the run's tracker (`track=wandb|mlflow`, hdppo/engine/tracking.py)
and, at close, writes the run's config as TensorBoard hparams next to the scalars.
"""

from __future__ import annotations

import csv
import errno
import math
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from hdppo.engine.tracking import RunTracking, write_hparams
from hdppo.errors import HdppoError

_SCOPE_RE = re.compile(r"^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*$")
_FIXED = ("step", "wall_time")


def scope_file(run_dir: str | Path, scope: str) -> Path:
    """The CSV path of a scope: ``run_dir/metrics/<scope, '/' replaced by '__'>.csv``."""
    return Path(run_dir) / "metrics" / (scope.replace("/", "__") + ".csv")


def _named(exc: OSError, path: Path) -> OSError:
    """The same OSError (errno, text, subclass) with the file it concerns, for the one-line report."""
    if exc.filename not in (None, "(injected)"):
        return exc
    named = OSError(exc.errno, exc.strerror or str(exc), str(path))
    return named if exc.errno is not None else exc


def _quiet_tensorboard_threads() -> None:
    """TensorBoard's writer thread re-raises a failed write, which threading prints as a traceback;
    the sink raises that error itself at its next log, flush or close, so the thread stays quiet."""
    previous = threading.excepthook
    if getattr(previous, "hdppo_quiet", False):
        return

    def hook(args: Any) -> None:
        if type(args.thread).__name__ == "_AsyncWriterThread" and issubclass(args.exc_type, OSError):
            return
        previous(args)
    hook.hdppo_quiet = True  # type: ignore[attr-defined]
    threading.excepthook = hook


def _cell(value: float) -> str:
    """A CSV cell: empty for NaN, shortest round-trip repr otherwise."""
    return "" if math.isnan(value) else repr(value)


class _ScopeCsv:
    """One scope's CSV file: appends rows, rewrites with a union header when keys appear."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys: list[str] = []
        self.file: IO[str] | None = None
        if path.exists() and path.stat().st_size > 0:  # resumed run: keep and extend
            with open(path, newline="") as f:
                header = next(csv.reader(f), [])
            self.keys = [k for k in header if k not in _FIXED]

    def write(self, step: int, wall: float, values: dict[str, float]) -> None:
        try:
            new = sorted(set(values) - set(self.keys))
            if new or self.file is None:
                self._reopen(sorted(set(self.keys) | set(values)))
            assert self.file is not None
            row = [str(step), repr(wall)] + [_cell(values.get(k, math.nan)) for k in self.keys]
            csv.writer(self.file).writerow(row)
            self.file.flush()
        except OSError as exc:
            raise _named(exc, self.path) from None

    def _reopen(self, keys: list[str]) -> None:
        """Open for appending; rewrite the existing rows first if the header changes."""
        if self.file is not None:
            self.file.close()
            self.file = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        exists = self.path.exists() and self.path.stat().st_size > 0
        if exists and keys != self.keys:
            with open(self.path, newline="") as f:
                rows = list(csv.DictReader(f))
            tmp = self.path.with_name(self.path.name + ".tmp")
            with open(tmp, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow([*_FIXED, *keys])
                for r in rows:
                    w.writerow([r.get(k) or "" for k in (*_FIXED, *keys)])
            os.replace(tmp, self.path)
        elif not exists:
            with open(self.path, "w", newline="") as f:
                csv.writer(f).writerow([*_FIXED, *keys])
        self.keys = keys
        self.file = open(self.path, "a", newline="")

    def close(self) -> None:
        if self.file is not None:
            file, self.file = self.file, None
            try:
                file.close()            # a row a full disk refused is flushed once more here, then dropped
            except OSError as exc:
                raise _named(exc, self.path) from None


class MetricsSink:
    """Writes scalar metrics per scope ("low", "low/worker_0", "run", ...) to CSV and TensorBoard.

    CSVs go to ``run_dir/metrics/<scope>.csv`` (columns: step, wall_time, sorted keys; NaN is an
    empty cell); TensorBoard scalars to ``run_dir/tb`` with tag ``"{scope}/{key}"`` (NaN
    skipped). Existing CSVs are appended to, so a resumed run continues its files. Thread-safe.
    ``track`` (none, wandb, mlflow) sends the same scalars to that tracker; in a run folder, close()
    writes config.json as TensorBoard hparams with the summary's tags as their metrics.
    """

    def __init__(self, run_dir: str | Path, tensorboard: bool = True, purge_step: int | None = None,
                 track: str = "none") -> None:
        self.run_dir = Path(run_dir)
        (self.run_dir / "metrics").mkdir(parents=True, exist_ok=True)
        self._csvs: dict[str, _ScopeCsv] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._failed: OSError | None = None      # the write error already raised to the caller
        self._tb: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as e:
                warnings.warn(
                    f"TensorBoard logging disabled ({e}); install tensorboard to enable it",
                    stacklevel=2,
                )
            else:
                # purge_step: a resumed run hides the events logged after the commit it continues from
                _quiet_tensorboard_threads()
                try:
                    self._tb = SummaryWriter(log_dir=str(self.run_dir / "tb"), flush_secs=10, purge_step=purge_step)
                except OSError as exc:
                    raise self._fail(exc, self.run_dir / "tb") from None
        self._tracking = RunTracking(self.run_dir, track)

    def _fail(self, exc: OSError, path: Path) -> OSError:
        """A write error naming `path`, remembered: it is raised once, and close() then stays quiet."""
        self._failed = _named(exc, path)
        return self._failed

    def log(self, scope: str, step: int, values: dict[str, float]) -> None:
        """Record ``values`` for ``scope`` at ``step`` (values must convert with float())."""
        if not _SCOPE_RE.match(scope):
            raise ValueError(
                f"metrics scope {scope!r} is invalid: use letters, digits, '_', '.', '-' "
                "separated by '/', e.g. 'low/worker_0'"
            )
        clash = [k for k in values if k in _FIXED]
        if clash:
            raise ValueError(f"metrics key(s) {clash} in scope {scope!r} are reserved; rename them")
        floats = {str(k): float(v) for k, v in values.items()}
        wall = time.time()
        with self._lock:
            if self._closed:
                raise RuntimeError("MetricsSink.log called after close()")
            if self._failed is not None:
                raise self._failed
            path = scope_file(self.run_dir, scope)
            try:
                sink = self._csvs.get(scope)
                if sink is None:
                    sink = self._csvs[scope] = _ScopeCsv(path)
                sink.write(int(step), wall, floats)
            except OSError as exc:
                raise self._fail(exc, path) from None
            if self._tb is not None:
                try:
                    for key in sorted(floats):
                        if not math.isnan(floats[key]):
                            self._tb.add_scalar(f"{scope}/{key}", floats[key], int(step), walltime=wall)
                except OSError as exc:
                    raise self._fail(exc, self.run_dir / "tb") from None
            self._tracking.log(scope, int(step), floats)

    def flush(self) -> None:
        """Push buffered data to disk."""
        with self._lock:
            if self._failed is not None:
                raise self._failed
            for sink in self._csvs.values():
                if sink.file is not None:
                    try:
                        sink.file.flush()
                    except OSError as exc:
                        raise self._fail(exc, sink.path) from None
            if self._tb is not None:
                try:
                    self._tb.flush()
                except OSError as exc:
                    raise self._fail(exc, self.run_dir / "tb") from None
            self._tracking.flush()

    def close(self) -> None:
        """Flush and close all files; further log() calls raise. Idempotent.

        Every file is closed even if one fails. After a write error was already raised (or while
        another error is on its way up), failures here are not raised again: that error is the
        one to report. Otherwise a failure is one HdppoError naming the file."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            errors: list[OSError] = []
            for sink in self._csvs.values():
                try:
                    sink.close()
                except OSError as exc:
                    errors.append(exc)
            summary = self._tracking.summary()
            self._tracking.close(_status(sys.exc_info()[1]))
            if self._tb is not None:
                if self._tracking.config and summary and self._failed is None:
                    try:
                        write_hparams(self._tb, self._tracking.config, summary)
                    except OSError as exc:
                        errors.append(_named(exc, self.run_dir / "tb"))
                try:
                    self._tb.close()
                except OSError as exc:
                    errors.append(_named(exc, self.run_dir / "tb"))
            if errors and self._failed is None and sys.exc_info()[1] is None:
                first = errors[0]
                fix = "free disk space" if first.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)) else \
                    "make the folder writable"
                raise HdppoError(f"cannot write {first.filename or self.run_dir}: {first.strerror or first} (errno "
                                 f"{first.errno}) closing the metrics; kept: every commit of {self.run_dir} and the "
                                 "metric rows written before", f"{fix}; the run's commits are whole")

    def __enter__(self) -> MetricsSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _status(error: BaseException | None) -> str:
    """How the run ended, for the tracker: FINISHED, KILLED (a stop signal, whose RunInterrupted
    carries its `signum`, or Ctrl-C), or FAILED."""
    if error is None:
        return "FINISHED"
    return "KILLED" if isinstance(error, KeyboardInterrupt) or hasattr(error, "signum") else "FAILED"


def read_csv(run_dir: str | Path, scope: str) -> list[dict[str, float]]:
    """Rows of a scope's CSV: ``step`` as int, other columns as float (empty cells -> NaN)."""
    rows = []
    with open(scope_file(run_dir, scope), newline="") as f:
        for r in csv.DictReader(f):
            row: dict[str, float] = {}
            for k, v in r.items():
                if k == "step":
                    row[k] = int(v)
                else:
                    row[k] = float(v) if v not in ("", None) else math.nan
            rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# progress display

# (key in the per-layer dict, column title, format)
LAYER_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("optimizer_steps", "opt. steps", "{:.0f}"),
    ("return", "return", "{:.3g}"),
    ("goal_success", "goal succ.", "{:.2f}"),
    ("kl", "KL", "{:.2e}"),
    ("clipfrac", "clipfrac", "{:.3f}"),
    ("version", "version", "{:.0f}"),
)
_SHORT = {"optimizer_steps": "opt", "return": "ret", "goal_success": "goal", "kl": "kl",
          "clipfrac": "clip", "version": "v"}


def _fmt(value: Any, spec: str) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(v) else spec.format(v)


def _hms(seconds: float) -> str:
    s = int(max(0.0, seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """Training progress: a live rich table on a terminal, else a compact line every few seconds.

    ``layers`` passed to update() maps a layer name to a dict with any of the keys in
    LAYER_COLUMNS (updates, return, goal_success, kl, clipfrac, version); missing values show "-".
    """

    def __init__(
        self,
        target_steps: int | None = None,
        enabled: bool = True,
        interval_s: float = 10.0,
        title: str = "hdppo",
        stream: IO[str] | None = None,
        mode: str | None = None,
    ) -> None:
        """`mode` (TrainConfig.progress): auto, lines or off; without it `enabled` says auto or lines."""
        self.target_steps = target_steps
        self.mode = mode if mode is not None else ("auto" if enabled else "lines")
        self.enabled = self.mode == "auto"
        self.interval_s = interval_s
        self.title = title
        self._stream = stream
        self._live: Any = None
        self._started_at: float | None = None
        self._last_print = -math.inf
        self._state: tuple[int, float, dict[str, dict[str, float]]] | None = None
        self._printed_state = True

    @property
    def stream(self) -> IO[str]:
        return self._stream if self._stream is not None else sys.stdout

    @property
    def live(self) -> bool:
        """True while the rich live display is showing."""
        return self._live is not None

    def start(self) -> Progress:
        """Start the clock and, on a TTY with enabled=True, the live display."""
        if self._started_at is None:
            self._started_at = time.monotonic()
        isatty = getattr(self.stream, "isatty", lambda: False)()
        if self.enabled and isatty and self._live is None:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self.stream)
            self._live = Live(self._table(), console=console, refresh_per_second=4, transient=False)
            self._live.start()
        return self

    def stop(self) -> None:
        """Stop the live display; in line mode, print the last state if not yet printed."""
        if self._live is not None:
            if self._state is not None:
                self._live.update(self._table())
            self._live.stop()
            self._live = None
        elif self._state is not None and not self._printed_state:
            self._print_line()

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def elapsed(self) -> float:
        """Seconds since start()."""
        return 0.0 if self._started_at is None else time.monotonic() - self._started_at

    def update(self, total_steps: int, sps: float, layers: dict[str, dict[str, float]]) -> None:
        """Show the current totals; in line mode print at most every interval_s seconds."""
        if self.mode == "off":
            return
        if self._started_at is None:
            self._started_at = time.monotonic()
        self._state = (int(total_steps), float(sps), {k: dict(v) for k, v in layers.items()})
        self._printed_state = False
        if self._live is not None:
            self._live.update(self._table())
        elif time.monotonic() - self._last_print >= self.interval_s:
            self._print_line()

    def print(self, message: str) -> None:
        """Print a message without disturbing the live display."""
        if self._live is not None:
            self._live.console.print(message)
        else:
            print(message, file=self.stream, flush=True)

    def _header(self) -> str:
        steps, sps, _ = self._state if self._state is not None else (0, 0.0, {})
        if self.target_steps:
            pct = 100.0 * steps / self.target_steps
            head = f"steps {steps:,}/{self.target_steps:,} ({pct:.1f}%)"
        else:
            head = f"steps {steps:,}"
        head += f" | SPS {sps:,.0f} | elapsed {_hms(self.elapsed())}"
        if self.target_steps and sps > 0 and steps < self.target_steps:
            head += f" | ETA {_hms((self.target_steps - steps) / sps)}"
        return head

    def line(self) -> str:
        """The compact one-line summary of the last update."""
        parts = [f"[{self.title}] {self._header()}"]
        layers = self._state[2] if self._state is not None else {}
        for name, vals in layers.items():
            cells = [f"{_SHORT[k]} {_fmt(vals.get(k), spec)}" for k, _, spec in LAYER_COLUMNS]
            parts.append(f"{name}: " + " ".join(cells))
        return " | ".join(parts)

    def _print_line(self) -> None:
        print(self.line(), file=self.stream, flush=True)
        self._last_print = time.monotonic()
        self._printed_state = True

    def _table(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        table = Table()
        table.add_column("layer")
        for _, title, _ in LAYER_COLUMNS:
            table.add_column(title, justify="right")
        layers = self._state[2] if self._state is not None else {}
        for name, vals in layers.items():
            table.add_row(name, *(_fmt(vals.get(k), spec) for k, _, spec in LAYER_COLUMNS))
        return Group(Text(f"{self.title}  {self._header()}", style="bold"), table)


# ---------------------------------------------------------------------------------------------
# CPU utilisation


class CpuMeter:
    """CPU use of a process and all its descendants, as a percentage of one core.

    Each call returns the CPU time used by the tree since the previous call divided by the wall
    time in between (100.0 = one core busy); the first call returns 0.0. CPU time of children
    that exited between two calls is not counted.
    """

    def __init__(self, pid: int | None = None) -> None:
        import psutil

        self._root = psutil.Process(pid)
        self._seen: dict[tuple[int, float], float] = {}
        self._last_wall: float | None = None

    def _tree(self) -> Iterator[tuple[tuple[int, float], float]]:
        import psutil

        try:
            procs = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            procs = [self._root]
        for p in procs:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    yield (p.pid, p.create_time()), t.user + t.system
            except psutil.Error:
                continue

    def __call__(self) -> float:
        now = time.monotonic()
        used = 0.0
        current: dict[tuple[int, float], float] = {}
        for key, total in self._tree():
            current[key] = total
            if key in self._seen:
                used += max(0.0, total - self._seen[key])
            elif self._last_wall is not None:
                used += total  # not there at the previous call: started since
        last = self._last_wall
        self._seen = current
        self._last_wall = now
        if last is None or now <= last:
            return 0.0
        return 100.0 * used / (now - last)


_DEFAULT_METER: CpuMeter | None = None


def cpu_utilisation() -> float:
    """CPU percent (100 = one core) of this process tree since the previous call; 0.0 first."""
    global _DEFAULT_METER
    if _DEFAULT_METER is None:
        _DEFAULT_METER = CpuMeter()
        _DEFAULT_METER()
        return 0.0
    return _DEFAULT_METER()
