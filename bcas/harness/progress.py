"""Progress of running cases in pytest's terminal: one live line per running case.

Each running case has one line: items done of total, items per second (since its first
item finished: :meth:`CaseStats.rate`), the time left at that rate (ETA), and the tokens and cost its items have spent so far (a cost the
price sheet cannot give is "unknown", never 0).  How it is shown depends on where
the output goes:

- a terminal (pytest's own output is a TTY): the lines are drawn under pytest's current
  line with relative cursor movement (ECMA-48: line feed, cursor up/forward, erase below),
  and erased before pytest writes anything, so when a case ends pytest's normal result
  (its ``.`` or ``PASSED``) is all that stays;
- not a terminal (CI logs): no cursor movement; one plain line per case after its
  result, and one every :data:`PLAIN_EVERY_S` seconds while a long case runs;
- ``-q``: nothing but warnings;
- ``-n`` (pytest-xdist): workers write their cases' state into a temporary folder; the
  controller reads it and shows one line per running case, prefixed with the worker
  (``[gw0]``), live in a terminal or as plain lines otherwise.  The end-of-case line
  reaches the controller with the case's report (:mod:`bcas.run.exports` properties).

Nothing here evaluates record content; a line is built from counts.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from bcas.harness import state
from bcas.metrics.latency import per_minute
from bcas.records.case_status import MARKS
from bcas.run.cost import cost_text, record_spend
from bcas.run.exports import case_result

PLAIN_EVERY_S = 30.0  # plain lines of a running case, at most this often
DRAW_EVERY_S = 0.1  # live redraws of one process's cases, at most this often
TICK_S = 0.25  # the xdist controller's look at its workers' state
PROGRESS = pytest.StashKey["ProgressPlugin"]()


def format_duration(seconds: float) -> str:
    if seconds < 9.95:
        return f"{seconds:.1f}s"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def format_tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


@dataclass
class CaseStats:
    """What one running case has done so far (JSON-safe: xdist workers hand it to the controller)."""

    case_id: str
    total: int
    resumed: int
    priced: bool = True
    done: int = 0
    tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0
    started: float = 0.0
    stopped: bool = False
    first_done: float = 0.0  # when the first item of this session finished (0: none yet)

    def add(self, record: Any, now: float | None = None) -> None:
        tokens, cost = record_spend(record)
        self.done += 1
        if self.done == 1:
            self.first_done = now if now is not None else time.time()
        self.tokens += tokens
        if cost is None:
            self.unpriced += 1
        else:
            self.cost += cost

    def rate(self, now: float) -> float | None:  # items per second, for the ETA
        """Items per second since the first item finished (``None`` before a second one has).

        Not from the case's start: the first item carries the one-off costs (an index read,
        lazy imports, a model's first call) and, with C items in flight, finishes about when
        the first C do; counting from it made an instant backend's ETA tens of times too long.
        """
        since = now - self.first_done
        return (self.done - 1) / since if self.done >= 2 and since > 0 else None

    def line(self, now: float | None = None) -> str:
        rate = self.rate(now if now is not None else time.time())
        left = max(0, self.total - self.resumed - self.done)
        parts = [
            f"{self.resumed + self.done}/{self.total} items",
            f"{per_minute(rate, 1.0) or 0:.1f} items/min" if rate else "- items/min",
            ("stopped at the cost cap" if self.stopped else f"ETA {format_duration(left / rate)}" if rate else "ETA ?"),
            f"{format_tokens(self.tokens)} tokens",
            cost_text(self.cost, self.unpriced, self.priced),
        ]
        return f"{self.case_id}: " + ", ".join(parts)


class LiveScreen:
    """Lines drawn under pytest's current terminal line, erased before pytest writes again.

    Writes go to a duplicate of the terminal's file descriptor, so output capture during a
    test does not swallow them; pytest's own text is never rewritten.
    """

    def __init__(self, fd: int, writer: Any) -> None:
        self.fd = fd
        self.writer = writer  # pytest's TerminalWriter: its current line's width and the screen width
        self.shown = 0
        self.lock = threading.RLock()

    def _write(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os.write(self.fd, data) :]

    def clear(self) -> None:
        with self.lock:
            if self.shown:
                self._write("\x1b[J")  # erase from the cursor (the end of pytest's line) to the end of the screen
                self.shown = 0

    def draw(self, lines: list[str]) -> None:
        with self.lock:
            width = int(self.writer.fullwidth)
            col = int(self.writer.width_of_current_line)
            if col >= width - 1:  # pytest's line fills the row: a cursor move back up would land elsewhere
                self.clear()
                return
            shown = [line[: width - 1] for line in lines]
            out = "\x1b[J" if self.shown else ""
            out += "".join("\n" + line for line in shown)
            if shown:
                out += f"\x1b[{len(shown)}A\r" + (f"\x1b[{col}C" if col else "")
            self._write(out)
            self.shown = len(shown)


class ProgressPlugin:
    """Registered by the bcas plugin; the session's cases report to it (:meth:`start`, :meth:`message`)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.tr: Any = None  # pytest's terminal reporter, once the session starts
        self.quiet = True
        self.worker = getattr(config, "workerinput", {}).get("workerid")
        self.controller = False  # an xdist controller (known once the session starts)
        token = state.token(config)
        self.folder = Path(tempfile.gettempdir()) / f"bcas-progress-{token}"
        self.screen: LiveScreen | None = None
        self.running: dict[str, CaseStats] = {}
        self.results: dict[str, dict[str, Any]] = {}  # case id -> end-of-case numbers (bcas.run.exports)
        self._last_draw = 0.0
        self._last_plain: dict[str, float] = {}
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self._log_offsets: dict[str, int] = {}
        self.lock = threading.RLock()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Choose how progress is shown, once pytest's terminal reporter exists."""
        self.tr = self.config.pluginmanager.getplugin("terminalreporter")
        self.quiet = self.tr is None or self.config.get_verbosity() < 0
        self.controller = self.worker is None and self.config.pluginmanager.hasplugin("dsession")
        if self.controller:
            self.folder.mkdir(parents=True, exist_ok=True)
        if self.worker is None and not self.quiet and _is_terminal(self.tr):
            # pytest's terminal writer writes to sys.stdout (capture is suspended between tests).
            with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
                if os.isatty(sys.stdout.fileno()):
                    self.screen = LiveScreen(os.dup(sys.stdout.fileno()), self.config.get_terminal_writer())

    # -- the cases' side --------------------------------------------------------------------
    def start(self, case: Any, total: int, resumed: int, priced: bool = True) -> CaseTracker:
        stats = CaseStats(case.id, total, resumed, priced=priced, started=time.time())
        self.running[case.id] = stats
        self._last_plain[case.id] = stats.started
        self._show(force=True)
        return CaseTracker(self, stats)

    def message(self, text: str) -> None:
        """A line of its own (a resume note, a warning); under -q only warnings."""
        if self.quiet and "warning" not in text:
            return
        if self.worker is not None:
            self._append_log(text)
            return
        self._write_line(text)

    def _show(self, force: bool = False) -> None:
        now = time.time()
        if self.worker is not None:
            if force or now - self._last_draw >= DRAW_EVERY_S:
                self._last_draw = now
                self._write_snapshot()
            return
        if self.quiet:
            return
        if self.screen is not None:
            if force or now - self._last_draw >= DRAW_EVERY_S:
                self._last_draw = now
                self.screen.draw([s.line(now) for s in self.running.values()])
            return
        for case_id, stats in self.running.items():
            if now - self._last_plain.get(case_id, now) >= PLAIN_EVERY_S:
                self._last_plain[case_id] = now
                self._write_line("[bcas] " + stats.line(now))

    def _finished(self, stats: CaseStats, result: dict[str, Any]) -> None:
        self.running.pop(stats.case_id, None)
        self.results[stats.case_id] = result
        if self.worker is not None:
            self._write_snapshot()
        elif self.screen is not None and not self.quiet:
            self.screen.draw([s.line() for s in self.running.values()])

    def _write_line(self, text: str) -> None:
        if self.tr is None:
            return
        capman = self.config.pluginmanager.getplugin("capturemanager")
        with self.lock:
            if self.screen is not None:
                self.screen.clear()
            with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
                self.tr.ensure_newline()
                self.tr.write_line(text)
            if self.screen is not None and self.running and self.worker is None:
                self.screen.draw([s.line() for s in self.running.values()])

    # -- xdist: workers write, the controller reads -----------------------------------------------
    def _write_snapshot(self) -> None:
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"{self.worker}.json"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps([asdict(s) for s in self.running.values()]), encoding="utf-8")
            tmp.replace(path)

    def _append_log(self, text: str) -> None:
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.folder / f"{self.worker}.log", "a", encoding="utf-8") as handle:
                handle.write(text.replace("\n", " ") + "\n")

    def _read_workers(self) -> list[tuple[str, CaseStats]]:
        found = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                cases = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # being replaced right now: next tick
            for data in cases if isinstance(cases, list) else []:
                with contextlib.suppress(TypeError):
                    found.append((path.stem, CaseStats(**data)))
        return found

    def _read_logs(self) -> list[str]:
        lines = []
        for path in sorted(self.folder.glob("*.log")):
            with contextlib.suppress(OSError):
                data = path.read_bytes()
                start = self._log_offsets.get(path.name, 0)
                end = data.rfind(b"\n") + 1
                if end > start:
                    self._log_offsets[path.name] = end
                    lines += data[start:end].decode("utf-8", "replace").splitlines()
        return lines

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            self.poll()

    def poll(self) -> None:
        """The controller's look at its workers: new messages as lines, running cases as live or plain lines."""
        for line in self._read_logs():
            self._write_line(line)
        if self.quiet:
            return
        now = time.time()
        cases = self._read_workers()
        with self.lock:
            if self.screen is not None:
                self.screen.draw([f"[{worker}] {stats.line(now)}" for worker, stats in cases])
                return
            for worker, stats in cases:
                last = self._last_plain.setdefault(f"{worker}/{stats.case_id}", stats.started)
                if now - last >= PLAIN_EVERY_S:
                    self._last_plain[f"{worker}/{stats.case_id}"] = now
                    self._write_line(f"[bcas] [{worker}] {stats.line(now)}")

    # -- pytest hooks --------------------------------------------------------------------------
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        if self.controller and self.worker is None:
            self._ticker = threading.Thread(target=self._tick, name="bcas-progress", daemon=True)
            self._ticker.start()
        try:
            yield
        finally:
            if self._ticker is not None:
                self._stop.set()
                self._ticker.join(timeout=5)
                self._ticker = None
                for line in self._read_logs():
                    self._write_line(line)
            if self.screen is not None:
                self.screen.clear()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_logstart(self) -> Any:
        with self._quiet_screen():
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_logfinish(self) -> Any:
        with self._quiet_screen():
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Any:
        with self._quiet_screen():
            yield
            if report.when == "call" and self.screen is None and not self.quiet and self.worker is None:
                line = end_line(dict(report.user_properties), getattr(getattr(report, "node", None), "gateway", None))
                if line:
                    self._write_end_line(line)

    def _write_end_line(self, line: str) -> None:
        """A case's plain end line on a line of its own, without blank lines around it."""
        self.tr.ensure_newline()
        if self.config.get_terminal_writer().width_of_current_line:  # xdist's dots have no path to end them
            self.tr.write("\n")
        if self.controller:
            # xdist writes its next result without starting a new line: end this one, and say so.
            self.tr.write(line + "\n", flush=True)
            self.tr.currentfspath = None
        else:
            # Left open: pytest starts its next test's line with a newline of its own.
            self.tr.write(line, flush=True)

    @contextlib.contextmanager
    def _quiet_screen(self) -> Any:
        """Hold the screen while pytest writes: live lines are erased first and redrawn on the next update."""
        with self.lock:
            if self.screen is not None:
                self.screen.clear()
            yield

    def pytest_unconfigure(self) -> None:
        if self.screen is not None:
            with contextlib.suppress(OSError):
                os.close(self.screen.fd)
            self.screen = None
        if self.controller:
            shutil.rmtree(self.folder, ignore_errors=True)


class CaseTracker:
    """One running case's handle: the runner reports each finished item and the case's end."""

    def __init__(self, plugin: ProgressPlugin | None, stats: CaseStats) -> None:
        self.plugin = plugin
        self.stats = stats

    def item_done(self, record: Any) -> None:
        self.stats.add(record)
        if self.plugin is not None:
            self.plugin._show()

    def stopped(self) -> None:
        self.stats.stopped = True

    def finish(self, outcome: Any, grid: str, label: str) -> dict[str, Any]:
        """The case's end-of-run numbers (primary metric, interval, n, tokens, cost) for its report and JUnit XML."""
        result = case_result(self.stats, outcome, grid, label)
        if self.plugin is not None:
            self.plugin._finished(self.stats, result)
        return result


def end_line(props: dict[str, Any], gateway: Any = None) -> str:
    """The plain end-of-case line from a case report's ``bcas_*`` properties ('' for other tests)."""
    case_id = props.get("bcas_case")
    if not case_id:
        return ""
    prefix = f"[{gateway.id}] " if gateway is not None and getattr(gateway, "id", None) else ""
    resumed = int(props.get("bcas_items_resumed") or 0)
    total, ran = int(props.get("bcas_items_total") or 0), int(props.get("bcas_items_run") or 0)
    wall = float(props.get("bcas_wall_s") or 0.0)
    # The latency line's items/min (its records' answers over their own span); the case's wall time
    # beside it also holds its set-up (an index build), which is no throughput.
    per_min = props.get("bcas_items_per_min")
    rate = f", {float(per_min):.1f} items/min" if per_min else ""
    tail = f" ({resumed} already recorded)" if resumed else ""
    # fewer items than the file holds, and why, beside the n
    of_file = f" ({props['bcas_items_note']})" if props.get("bcas_items_note") else ""
    acc = props.get("bcas_accuracy")
    score = (
        (
            f"; {props.get('bcas_metric')} {float(acc) * 100:.1f}% [{float(props['bcas_ci_low']) * 100:.1f}, "
            f"{float(props['bcas_ci_high']) * 100:.1f}] n={props.get('bcas_n')}{of_file}"
        )
        if acc not in (None, "")
        else ""
    )
    status = str(props.get("bcas_status") or "")
    if status in MARKS:  # no accuracy for a case that did not pass: why
        score = f"; {MARKS[status]}: {props.get('bcas_reason')}"
    return (
        f"[bcas] {prefix}{case_id}: {resumed + ran}/{total} items{tail} in {format_duration(wall)}{rate}, "
        f"{format_tokens(int(props.get('bcas_run_tokens') or 0))} tokens, {props.get('bcas_run_cost')}"
        f"{score}"
    )


def _is_terminal(tr: Any) -> bool:
    if tr is None or os.environ.get("TERM", "") == "dumb":
        return False
    try:
        return bool(tr.isatty())
    except (AttributeError, ValueError):
        return False


def progress_for(config: Any) -> ProgressPlugin | None:
    """The session's progress plugin (None outside pytest, or before the bcas plugin configured it)."""
    if config is None or not hasattr(config, "stash"):
        return None
    plugin: ProgressPlugin | None = config.stash.get(PROGRESS, None)
    return plugin


def register(config: pytest.Config) -> ProgressPlugin:
    """Create and register the session's progress plugin (from the bcas plugin's ``pytest_configure``)."""
    plugin = ProgressPlugin(config)
    config.stash[PROGRESS] = plugin
    config.pluginmanager.register(plugin, "bcas-progress")
    return plugin


def start_case(config: Any, case: Any, total: int, resumed: int, priced: bool = True) -> CaseTracker:
    """A tracker for one case: shown by the session's progress plugin, or only counted outside pytest."""
    plugin = progress_for(config)
    if plugin is not None:
        return plugin.start(case, total, resumed, priced)
    return CaseTracker(None, CaseStats(case.id, total, resumed, priced=priced, started=time.time()))


def message_writer(config: Any) -> Any:
    """``write(line)`` for the session's notes and warnings (a no-op outside pytest)."""
    plugin = progress_for(config)
    return plugin.message if plugin is not None else (lambda line: None)
