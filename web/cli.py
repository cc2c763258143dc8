"""The ``pdlab`` command.

    pdlab serve [--host 127.0.0.1] [--port 8000] [--profile FILE ...] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import sys

from engine.calibration import ProfileError, load_profile

PROFILE_ENV = "PDLAB_PROFILES"


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    for path in args.profile:
        try:
            load_profile(path)  # fail here, before any worker starts, with a clear message
        except ProfileError as exc:
            print(f"pdlab serve: {exc}", file=sys.stderr)
            return 2
    os.environ[PROFILE_ENV] = os.pathsep.join(args.profile)
    uvicorn.run(
        "web.app:create_app", factory=True, host=args.host, port=args.port, workers=args.workers,
        log_level=args.log_level, timeout_graceful_shutdown=10,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``pdlab`` and its subcommands."""
    parser = argparse.ArgumentParser(prog="pdlab", description="Prefill & Decode Lab")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the labs over HTTP")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--profile", action="append", default=[], metavar="FILE",
                       help="a calibration profile to offer in every lab (repeatable)")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (the app keeps no state)")
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(func=_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pdlab`` console script."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
