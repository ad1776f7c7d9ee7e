"""Command-line subcommands; each module exposes ``main(argv) -> int``."""
