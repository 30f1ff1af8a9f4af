#!/usr/bin/env python3
"""Build the built-in synthetic speech corpus (same as ``speechkit corpus``).

Example::

    python tools/make_corpus.py data/corpus --size demo
"""
import argparse
import sys

from speechkit.commands import corpus as cli
from speechkit.errors import SpeechkitError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="make_corpus.py", description=__doc__.splitlines()[0])
    cli.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return cli.run(args)
    except SpeechkitError as error:
        print(f"make_corpus.py: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
