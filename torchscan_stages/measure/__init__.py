"""Workload measurement: one pass each for latency, tracked memory, process RSS and the profiler.

Clean timing never runs under hooks, dispatch modes or the profiler: those are separate
passes (``workload.py`` runs the selected ones in order). Settings live in one
``LatencyOptions``; every number is a MetricResult with its scope and method.

Never: runs timing under instrumentation; prints or renders a report.
"""
