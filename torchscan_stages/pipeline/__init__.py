"""The Hydra + DVC pipeline's machinery: config schema and loader, the stage runner, workloads.

A stage (``stages/``) is config in, one library call, one report out; what they share lives
here: composing ``params.yaml`` from ``conf/``, validating the config, building the workload
the config names, the host timing lock, sweep summaries and the commit recipe.

Never: measures: it calls the library.
"""
