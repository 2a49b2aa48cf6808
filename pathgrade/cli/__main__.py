"""`python -m pathgrade.cli` and the `pathgrade` executable: the command line."""

import sys


def run() -> int:
    """`main.main`, and exit code 130 without a traceback for a Ctrl-C that comes while the
    command line is still being imported or its parser built."""
    try:
        from pathgrade.cli.main import main

        return main()
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(run())
