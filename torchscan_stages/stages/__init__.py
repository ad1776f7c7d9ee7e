"""One thin module per DVC stage: ``python -m torchscan_stages.stages.NAME``.

Each reads the composed config, makes one library call and writes one report (and its flat
metrics) atomically, through ``pipeline/runner.py``'s common template.

Never: holds measurement logic.
"""
