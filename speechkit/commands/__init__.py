"""One module per ``speechkit <command>`` (and per subcommand of a command group such as ``speechkit data``).

A command module defines ``add_arguments(parser)`` and ``run(args) -> int | None``; ``speechkit.cli`` imports
it only when that command runs. It holds the command-line side only: its arguments, turning them into calls
of the library (whose functions take keyword arguments, never an ``argparse.Namespace``), and what it
prints. Every command that loads a model takes its model flags from :mod:`speechkit.commands.model_source`.
The layer of this package is above every face it calls (docs/design.md).
"""
