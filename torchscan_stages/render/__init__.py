"""Offline HTML for every report kind: one self-contained page, no network resources.

Never: reads anything but reports.
"""

from __future__ import annotations

from .html import render_index, render_report

__all__ = ["render_index", "render_report"]
