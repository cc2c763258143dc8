"""The ``pdlab`` command.

    pdlab serve [--host 127.0.0.1] [--port 8000] [--profile FILE ...] [--workers N] [--frame-ancestor ORIGIN ...]
                [--model-config FILE ...] [--gpu-spec FILE ...]
    pdlab calibrate [--device cuda|cpu] [--model ID] [--quick] [--threads N] [--id ID] --out FILE
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
    from web.accesslog import log_config
    from web.security import FRAME_ANCESTORS_ENV, parse_frame_ancestors

    try:
        parse_frame_ancestors(" ".join(args.frame_ancestor))
    except ValueError as exc:
        print(f"pdlab serve: {exc}", file=sys.stderr)
        return 2
    from engine.hf_config import ConfigError
    from web.catalog_files import GPU_SPECS_ENV, MODEL_CONFIGS_ENV, load_catalog_files

    try:
        load_catalog_files(args.model_config, args.gpu_spec)
    except (ConfigError, ValueError) as exc:
        print(f"pdlab serve: {exc}", file=sys.stderr)
        return 2
    os.environ[MODEL_CONFIGS_ENV] = os.pathsep.join(args.model_config)
    os.environ[GPU_SPECS_ENV] = os.pathsep.join(args.gpu_spec)
    os.environ[PROFILE_ENV] = os.pathsep.join(args.profile)
    os.environ[FRAME_ANCESTORS_ENV] = " ".join(args.frame_ancestor)
    # Access logs are JSON lines from web/accesslog.py, so uvicorn's own access log is off.
    uvicorn.run(
        "web.app:create_app", factory=True, host=args.host, port=args.port, workers=args.workers,
        log_level=args.log_level, log_config=log_config(args.log_level), access_log=False, timeout_graceful_shutdown=10,
    )
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    try:
        import torch

        from kernels.calibrate import calibrate, print_error_table
    except ImportError as exc:
        print(f"pdlab calibrate: needs the kernels extra (pip install -e '.[kernels]'): {exc}", file=sys.stderr)
        return 2
    if args.threads < 1:
        print("pdlab calibrate: --threads must be >= 1", file=sys.stderr)
        return 2
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.device is None:
        print(f"pdlab calibrate: timing on {device}" + ("" if device == "cuda" else " (torch sees no CUDA GPU)"),
              file=sys.stderr)
    try:
        profile = calibrate(device, args.model, quick=args.quick, threads=args.threads,
                            profile_id=args.profile_id)
    except (KeyError, ValueError) as exc:
        print(f"pdlab calibrate: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    with open(args.out, "w") as f:
        f.write(profile.model_dump_json(indent=1))
    load_profile(args.out)  # what was written reads back as a valid profile
    print_error_table(profile)
    print(f"wrote {args.out} (profile {profile.id}); use it with: pdlab serve --profile {args.out}")
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
    serve.add_argument("--frame-ancestor", action="append", default=[], metavar="ORIGIN",
                       help="an origin allowed to embed the labs in a frame, e.g. https://slides.example.org "
                            "(repeatable; by default only this server's own pages may)")
    serve.add_argument("--model-config", action="append", default=[], metavar="FILE",
                       help="a Hugging Face config.json to offer as a model in every lab (repeatable); "
                            "its id is the last part of _name_or_path, else the file's name")
    serve.add_argument("--gpu-spec", action="append", default=[], metavar="FILE",
                       help="a GPU's figures as JSON (bf16_tflops, fp8_tflops, memory_gb, "
                            "memory_bandwidth_gb_per_s, interconnect_gb_per_s, name, id) to offer in every lab "
                            "(repeatable)")
    serve.set_defaults(func=_serve)
    calibrate = sub.add_parser(
        "calibrate", help="time the model's kernels on this device and write a measured profile",
        description="Times GEMMs, prefill and decode attention, KV stores and the device's ceilings, fits the "
                    "cost model on half the sizes and reports its error on the other half (needs the kernels "
                    "extra: torch, triton).",
    )
    calibrate.add_argument("--device", choices=("cuda", "cpu"), default=None,
                           help="where to time (default: cuda when torch sees a GPU, else cpu)")
    calibrate.add_argument("--model", default=None, metavar="ID",
                           help="catalog model whose shapes are timed (default: llama-3.1-8b on cuda, "
                                "llama-3.2-1b on cpu)")
    calibrate.add_argument("--quick", action="store_true", help="the small pack (under a minute)")
    calibrate.add_argument("--threads", type=int, default=1, metavar="N",
                           help="cpu only: torch threads (default 1, timed by CPU time so that other "
                                "processes do not skew it; N > 1 is timed by wall clock)")
    calibrate.add_argument("--id", default=None, dest="profile_id",
                           help="the profile's id (default <gpu>-measured or cpu-measured)")
    calibrate.add_argument("--out", required=True, metavar="FILE", help="where to write the profile (JSON)")
    calibrate.set_defaults(func=_calibrate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pdlab`` console script."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
