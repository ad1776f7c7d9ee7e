"""Comparison: model-cost reports (``reports``), workloads (``benchmarks``), and the
interleaved timing with its ratio statistics that ``benchmarks`` builds on (``interleave``).

Nothing is imported here, so ``import torchscan_stages.compare.reports`` does not load the
timing engine; the public names live on the package root.

Never: invents an owner's tolerance or budget; imports the pipeline.
"""
