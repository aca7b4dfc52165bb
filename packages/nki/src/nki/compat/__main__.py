"""``python -m nki.compat PATH...``: see ``nki.compat``."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .report import markdown, text_table
from .runner import run_paths


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nki.compat", description="Run NKI kernels against their own references.")
    parser.add_argument("paths", nargs="+", help="files or folders of NKI code (a repository checkout, a folder of it, ...)")
    parser.add_argument("--label", action="append", default=[], metavar="PATH=NAME",
                        help="name a path in the report, e.g. ./nki-samples=aws-neuron/nki-samples@6905a68")
    parser.add_argument("--markdown", help="write the report as Markdown to this file")
    parser.add_argument("--json", help="write every outcome as JSON lines to this file (and, while running, "
                                       "each finished batch to FILE.partial)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per unit (default 300)")
    parser.add_argument("--file-timeout", type=float, default=1800.0, help="seconds per file (default 1800)")
    parser.add_argument("--jobs", type=int, default=1, help="files run at once (default 1)")
    parser.add_argument("--header", default="# NKI compatibility", help="Markdown text above the tables")
    args = parser.parse_args(argv)
    labels = {}
    for item in args.label:
        path, sep, name = item.partition("=")
        if not sep:
            parser.error(f"--label takes PATH=NAME, got {item!r}")
        labels[os.path.abspath(path)] = name

    partial = args.json + ".partial" if args.json else None  # what a run stopped midway had finished
    if partial and os.path.exists(partial):
        os.unlink(partial)
    groups = []
    for path in args.paths:
        label = labels.get(os.path.abspath(path), path)

        def progress(outcomes, label=label):
            for o in outcomes:
                print(f"{o.status:9} {o.file}::{o.unit}  {o.detail[:120]}", file=sys.stderr, flush=True)
            if partial:
                with open(partial, "a") as f:
                    f.writelines(json.dumps({"repository": label, **o.to_dict()}) + "\n" for o in outcomes)

        groups.append((label, run_paths([path], args.timeout, args.file_timeout, args.jobs, progress)))
    for label, outcomes in groups:
        print(f"== {label}")
        print(text_table(outcomes))
    if partial and os.path.exists(partial):
        os.unlink(partial)
    if args.json:
        with open(args.json, "w") as f:
            for label, outcomes in groups:
                for o in outcomes:
                    f.write(json.dumps({"repository": label, **o.to_dict()}) + "\n")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(groups, args.header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
