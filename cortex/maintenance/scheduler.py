"""``cortex schedule``: a foreground loop for machines without cron.

The loop calls ``cortex run`` every few minutes and ``cortex maintain`` every quarter
hour; ``maintain`` itself knows which jobs are due (the loop keeps nothing between
processes and never runs missed calls, so catching up is ``maintain``'s business, not the
loop's). Each call is a child process: a job that fails or crashes is logged and the
loop carries on. SIGTERM or Ctrl-C stops the loop cleanly after the child in flight (if
any) has finished.

Intervals are counted on a clock that never goes back (``_clock``), not the wall clock:
the ``schedule`` package this loop ran on counts in naive local time, so each autumn,
as summer time ended, the local clock repeated an hour and the loop called nothing for
that hour (a clock set back by hand or by NTP did the same, for as long as the jump).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Callable, Sequence, TextIO

from cortex.timefmt import format_time, utcnow


def _clock() -> float:
    """Seconds that never go back, and that count the machine's sleep (a call due while a
    laptop slept is made as it wakes): Linux's boot time; elsewhere the monotonic clock."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(boottime) if boottime is not None else time.monotonic()


def cortex_command(vault_root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "cortex", "--vault", str(vault_root), *args]


class Loop:
    def __init__(self, vault_root: Path, *, run_every: timedelta, maintain_every: timedelta,
                 log: TextIO | None = None, command: Callable[..., list[str]] = cortex_command) -> None:
        self.root = vault_root
        self.run_every = run_every
        self.maintain_every = maintain_every
        self.log = log or sys.stderr
        self.command = command
        self.stopping = False
        self.failures = 0
        self.calls = 0

    def say(self, message: str) -> None:
        self.log.write(f"{format_time(utcnow())} cortex schedule: {message}\n")
        self.log.flush()

    def call(self, *args: str) -> int:
        """Run one cortex command; never raises (a failing job must not stop the loop)."""
        if self.stopping:
            return 0
        self.calls += 1
        try:
            proc = subprocess.run(self.command(self.root, *args), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as exc:
            self.failures += 1
            self.say(f"`cortex {' '.join(args)}` could not start: {exc}")
            return 127
        if proc.returncode != 0:
            self.failures += 1
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            self.say(f"`cortex {' '.join(args)}` failed (exit {proc.returncode}): {detail[0] if detail else 'no output'}; "
                     "carrying on")
        else:
            self.say(f"`cortex {' '.join(args)}` ok")
        return proc.returncode

    def _stop(self, signum, frame) -> None:
        self.stopping = True

    def serve(self, *, max_loops: int | None = None) -> int:
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        every = {"run": max(1, int(self.run_every.total_seconds())),
                 "maintain": max(1, int(self.maintain_every.total_seconds()))}
        self.say(f"watching {self.root}: `cortex run` every {self.run_every}, `cortex maintain` every "
                 f"{self.maintain_every} (SIGTERM or Ctrl-C stops)")
        try:
            due = {job: _clock() + seconds for job, seconds in every.items()}
            self.call("run")
            self.call("maintain")
            loops = 0
            while not self.stopping and (max_loops is None or loops < max_loops):
                loops += 1
                for job, seconds in every.items():
                    if not self.stopping and _clock() >= due[job]:
                        self.call(job)
                        due[job] = _clock() + seconds  # counted from the call's end, not its start
                idle = min(due.values()) - _clock()
                deadline = time.monotonic() + min(1.0, max(0.05, idle))
                while not self.stopping and time.monotonic() < deadline:
                    time.sleep(0.05)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        self.say(f"stopped ({self.calls} calls, {self.failures} failed)")
        return 0


def cron_text(vault_root: Path, exe: str, *, run_every_minutes: int = 5) -> str:
    """Crontab lines, systemd user units and a CI schedule that do what the loop does."""
    # Vaults live in paths with spaces (an iCloud folder) or a `%`: each line quotes for
    # its reader (cron's shell, with `%` escaped; systemd's own quoting and specifiers).
    c_exe, c_v = _cron_word(exe), _cron_word(str(vault_root))
    c_log = _cron_word(str(vault_root / "observer" / "cron.log"))
    s_exe, s_v = _systemd_word(exe), _systemd_word(str(vault_root))
    return f"""# --- crontab (crontab -e) ----------------------------------------------------------
# `cortex maintain` runs only the jobs that are due and catches up on missed ones,
# so calling it hourly is enough; a laptop asleep at night catches up when it wakes.
*/{run_every_minutes} * * * * {c_exe} --vault {c_v} run >> {c_log} 2>&1
7 * * * * {c_exe} --vault {c_v} maintain >> {c_log} 2>&1

# --- systemd user timer: ~/.config/systemd/user/cortex-maintain.service -------------
[Unit]
Description=cortex: process the buffer, then run due maintenance jobs

[Service]
Type=oneshot
# `-`: maintain runs even when run could not (the vault busy, or offline with sync on run),
# as the crontab's lines do; systemd runs the next ExecStart only after a success
ExecStart=-{s_exe} --vault {s_v} run
ExecStart={s_exe} --vault {s_v} maintain

# --- ~/.config/systemd/user/cortex-maintain.timer -------------------------------------
[Unit]
Description=cortex: every {run_every_minutes} minutes, catching up after sleep

[Timer]
OnCalendar=*:0/{run_every_minutes}
Persistent=true

[Install]
WantedBy=timers.target

# enable with: systemctl --user daemon-reload && systemctl --user enable --now cortex-maintain.timer

# --- CI schedule (GitHub Actions; the vault template ships .github/workflows/cortex-nightly.yml)
on:
  schedule:
    - cron: "17 3 * * *"
  workflow_dispatch:
jobs:
  maintain:
    runs-on: ubuntu-latest
    permissions:
      contents: write
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - run: |
          grep -q '^[^#[:space:]]' observer/requirements.txt || {{ echo "::error file=observer/requirements.txt::names no cortex to install"; sed -n 's/^# //p' observer/requirements.txt; exit 1; }}
          pip install -r observer/requirements.txt  # the cortex that made the vault
      - run: |
          git config user.name "cortex"
          git config user.email "cortex@localhost"
          cortex init .
      - run: cortex sync --no-push
      - run: cortex validate --all
      - run: cortex maintain
      - run: cortex sync   # pushes; merges and retries when an agent pushed meanwhile
"""


def _cron_word(text: str) -> str:
    import shlex

    return shlex.quote(text).replace("%", "\\%")  # an unescaped % ends a crontab command


def _systemd_word(text: str) -> str:
    if any(ch in text for ch in " \t\"'\\"):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text.replace("%", "%%").replace("$", "$$")  # specifiers and variables


def executable() -> str:
    exe = Path(sys.executable).with_name("cortex")
    return str(exe) if exe.exists() else "cortex"


def parse_every(text: str) -> timedelta:
    from cortex.timefmt import parse_duration

    return parse_duration(text)


__all__: Sequence[str] = ("Loop", "cron_text", "cortex_command", "executable", "parse_every")
