"""Command-line subcommands; each module exposes ``main(argv) -> int``.

Conventions every command keeps: a failure prints one line, ``PROG: error: WHAT``, to stderr
(never a traceback) and returns non-zero (1: the work failed, 2: bad arguments); all inputs
are loaded and checked before anything is written; an output that is a directory or one of
the inputs is refused with ``torchscan_stages.report.check_output_path`` before any work,
and outputs are written atomically (``atomic_write_text``).

Never: computes a number of its own.
"""
