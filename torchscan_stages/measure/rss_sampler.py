"""What the measuring process reads of its rss child while it runs: samples and phase evidence.

:class:`Sampler` polls the launcher's descendants: every tick the command's own high-water
mark (``VmHWM``, one small ``/proc`` read), every ``TREE_EVERY`` ticks the RSS summed over
all descendants (psutil walks every process, so it is kept off the fast path). Sampled
values are lower bounds, used where kernel accounting is missing.

:class:`PhaseWitness` is the parent's half of ``mark_phase``'s handshake: each tick it reads
the records the child appended to the phase file, reads the marking process's ``VmHWM``
itself (the child waits, so it has not reset it yet) and acknowledges each record with one
byte on the pipe the child waits on. A phase claim is then checked against the parent's own
reading of the same high-water mark, which the reset erases a moment later.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from . import rss_phases

TREE_EVERY = 5
MAX_ANCESTRY = 64  # how far up a record's pid is followed to find the launcher


@dataclass
class Sampler:
    """Polls the launcher's descendants (see the module docstring)."""

    launcher: psutil.Process
    main_peak: int = 0
    tree_peak: int = 0
    samples: int = 0
    tree_samples: int = 0
    ticks: int = 0
    main: psutil.Process | None = None
    known: dict[int, psutil.Process] = field(default_factory=dict)
    witness: PhaseWitness | None = None

    def sample(self) -> None:
        self.ticks += 1
        if self.main is None:
            try:
                direct = self.launcher.children(recursive=False)
            except psutil.Error:
                direct = []
            if direct:
                self.main = direct[0]
                self.known.setdefault(self.main.pid, self.main)
        if self.main is not None:
            peak = rss_phases.proc_status_bytes("VmHWM", self.main.pid)
            if peak is None:
                try:
                    peak = self.main.memory_info().rss
                except psutil.Error:
                    peak = None
            if peak is not None:
                self.samples += 1
                self.main_peak = max(self.main_peak, peak)
        if self.witness is not None:
            self.witness.poll(self)
        if self.ticks % TREE_EVERY == 1:
            self.sample_tree()

    def sample_tree(self) -> None:
        try:
            children = self.launcher.children(recursive=True)
        except psutil.Error:
            return
        total = 0
        for child in children:
            self.known.setdefault(child.pid, child)
            try:
                total += child.memory_info().rss
            except psutil.Error:
                continue
        if children:
            self.tree_samples += 1
            self.tree_peak = max(self.tree_peak, total)

    def descends(self, pid: int) -> bool:
        """Whether ``pid`` is the command or another descendant of the launcher."""
        if self.main is not None and pid == self.main.pid:
            return True
        try:
            process: psutil.Process | None = psutil.Process(pid)
            for _ in range(MAX_ANCESTRY):
                process = process.parent() if process is not None else None
                if process is None:
                    return False
                if process.pid == self.launcher.pid:
                    return True
        except psutil.Error:
            return False
        return False


@dataclass
class PhaseWitness:
    """The parent's reading of each phase record's ``VmHWM``, taken before the child resets.

    ``evidence[i]`` is the high-water mark the parent read for record ``i`` (by line, 0-based,
    as :func:`rss_records.read_phases` numbers them), or absent when it could not: the record
    names no process of the child's tree, or ``/proc`` cannot be read.
    """

    path: Path
    ack_fd: int
    evidence: dict[int, int] = field(default_factory=dict)
    lines: int = 0
    _offset: int = 0
    _partial: bytes = b""

    def poll(self, sampler: Sampler) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except OSError:
            return
        if not data:
            return
        self._offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        for raw in complete:
            pid = self._marker(raw, sampler)
            if pid is not None:  # a process of the child's tree marked it, and may wait
                reading = rss_phases.proc_status_bytes("VmHWM", pid)
                if reading is not None:
                    self.evidence[self.lines] = reading
                with contextlib.suppress(OSError):  # full (nobody read) or closed: go on
                    os.write(self.ack_fd, b".")
            self.lines += 1

    @staticmethod
    def _marker(raw: bytes, sampler: Sampler) -> int | None:
        """The pid the record names, when it is a process of the child's tree: a record
        naming another process (or none) gets no reading and no acknowledgement."""
        try:
            pid = json.loads(raw.decode("utf-8")).get("pid")
        except (ValueError, AttributeError, RecursionError):
            return None
        if type(pid) is not int or pid <= 0 or not sampler.descends(pid):
            return None
        return pid


__all__ = ["TREE_EVERY", "PhaseWitness", "Sampler"]
