"""``python -m tvm_tma demo|explain``: the package's command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tvm_tma")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="plan, build, assemble and run the seed demo")
    demo.add_argument("--arch", default="sm_90a", help="CUDA arch to assemble for")
    explain = commands.add_parser(
        "explain", help="print what dispatch='tma' does with each copy of a file's kernels")
    explain.add_argument("file", help="a Python file defining @T.prim_func kernels")
    explain.add_argument("--func", default=None,
                         help="only this PrimFunc (or a function that returns one)")
    explain.add_argument("--arch", default="sm_90a", help="target arch (e.g. sm_100a)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run

        return run(args.arch)
    from .explainer.cli import run

    return run(args.file, args.func, args.arch)


if __name__ == "__main__":
    sys.exit(main())
