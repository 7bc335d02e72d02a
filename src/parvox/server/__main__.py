"""``python -m parvox.server STORE [-n N] [options]``: ``parvox serve`` without the rest of the
``parvox`` command (tests and scripts launch servers with it; the options are the same).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` like ``parvox serve`` and run the server on this MPI job."""
    from parvox import comm
    from parvox.cli import serve

    parser = argparse.ArgumentParser(prog="python -m parvox.server", description=serve.HELP)
    serve.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        serve.validate(args)
    except ValueError as exc:
        sys.stderr.write(f"parvox serve: error: {exc}\n")
        return 2
    comm.abort_on_exception()
    return serve.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
