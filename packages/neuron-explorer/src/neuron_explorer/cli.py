"""The ``neuron-explorer`` command.

    neuron-explorer inspect -o ./output python train.py      capture a run, no code change
    neuron-explorer view -d ./output                         ingest (once) and serve the UI
    neuron-explorer view -d ./output --output-format summary-text
    neuron-explorer view -n kernel.neff                      the device profile of one NEFF
    neuron-explorer --show-profile-schema
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import webbrowser
from pathlib import Path

from neuron_sim.neff import Neff
from neuron_sim.runtime import RuntimeConfig

from .capture import config as capture_env
from .capture.config import CaptureConfig, parse_core_list, parse_event_filter
from .errors import ExplorerError
from .ingest import ingest
from .output.export import FORMATS, export
from .output.summary_text import summary_text
from .profile import Profile, open_profile
from .schema import describe_schema
from .server import Explorer, ExplorerServer, new_token
from .session.from_neff import session_from_neff
from .session.reader import find_sessions
from .session.writer import neff_file_stem
from .version import __version__


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neuron-explorer", description="Profiles of the software NeuronCore.")
    p.add_argument("--version", action="version", version=f"neuron-explorer {__version__}")
    p.add_argument("--show-profile-schema", action="store_true", help="print every table and field of the profile schema")
    p.add_argument("--schema-format", choices=("yaml", "json"), default="yaml")
    sub = p.add_subparsers(dest="command")

    i = sub.add_parser("inspect", help="run a command and capture its profile (no code change)")
    i.add_argument("-o", "--output-dir", required=True, help="profile output directory (NEURON_RT_INSPECT_OUTPUT_DIR)")
    i.add_argument("--device-profile", default="session", choices=("0", "1", "model", "session"),
                   help="instruction traces: 0 (none), model (first execution of each NEFF per core), session (all)")
    i.add_argument("--nc", help="capture only these NeuronCores, e.g. 0,2-3")
    i.add_argument("--event-types", help="event filter, e.g. hardware or software,^host_task")
    i.add_argument("--max-events-per-nc", type=int)
    i.add_argument("--num-warmup", type=int, help="executions to skip before device profiling")
    i.add_argument("cmd", nargs=argparse.REMAINDER, help="the command to run (after --)")

    v = sub.add_parser("view", help="ingest profiles and serve the UI, or write them in another format")
    v.add_argument("-d", "--directory", help="profile output directory, a session directory, or an ingested profile")
    v.add_argument("-n", "--neff", help="a NEFF: view its device profile (simulated, or from the session given with -s)")
    v.add_argument("-s", "--session", help="with -n: the capture session (or profile directory) holding its executions")
    v.add_argument("--output-format", choices=FORMATS, default="parquet")
    v.add_argument("--output-dir", help="where --output-format files (or the ingested tables of -n) go")
    v.add_argument("--ingest-only", action="store_true", help="ingest into Parquet and exit, without serving the UI")
    v.add_argument("--reingest", action="store_true", help="ingest again even if the profile is up to date")
    v.add_argument("--ignore-device-profile", action="store_true", help="leave instruction tables empty (faster)")
    v.add_argument("--display-name", help="name shown for the profile")
    v.add_argument("--framework-source-root", action="append", default=[], help="where the framework's source files are")
    v.add_argument("--nki-source-root", action="append", default=[], help="where NKI kernel sources are")
    v.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1, this machine only)")
    v.add_argument("--port", type=int, default=3001, help="port to serve on (0: any free port)")
    v.add_argument("--token", nargs="?", const="auto", help="require a token (given, or generated with 'auto')")
    v.add_argument("--no-token", action="store_true", help="serve a non-loopback address without a token")
    v.add_argument("--open", action="store_true", help="open the UI in a browser")
    v.add_argument("--progress", action="store_true", default=None, help="show progress bars (default: on a terminal)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.show_profile_schema:
            sys.stdout.write(describe_schema(args.schema_format))
            return 0
        if args.command == "inspect":
            return _inspect(args)
        if args.command == "view":
            return _view(args)
        _parser().print_help()
        return 2
    except (ExplorerError, FileNotFoundError) as err:
        print(f"neuron-explorer: error: {err}", file=sys.stderr)
        return 2


# --- inspect -------------------------------------------------------------------------------------
def _inspect(args) -> int:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise ExplorerError("inspect needs a command to run, e.g. neuron-explorer inspect -o ./output -- python train.py")
    env = dict(os.environ)
    env[capture_env.ENABLE_ENV] = "1"
    env[capture_env.OUTPUT_DIR_ENV] = str(Path(args.output_dir).resolve())
    env[capture_env.DEVICE_PROFILE_ENV] = args.device_profile
    if args.nc:
        parse_core_list(args.nc, "--nc")
        env[capture_env.FILTER_NC_ENV] = args.nc
    if args.event_types:
        parse_event_filter(args.event_types, "--event-types")
        env[capture_env.FILTER_TYPE_ENV] = args.event_types
    if args.max_events_per_nc is not None:
        env[capture_env.MAX_EVENTS_ENV] = str(args.max_events_per_nc)
    if args.num_warmup is not None:
        env[capture_env.NUM_WARMUP_ENV] = str(args.num_warmup)
    config = CaptureConfig.from_env(env)  # every bad option is reported here, before the command runs
    config.check_cores(RuntimeConfig.from_env(env).visible_cores)
    before = set(find_sessions(args.output_dir)) if Path(args.output_dir).is_dir() else set()
    started = time.time()
    try:
        code = subprocess.call(cmd, env=env)
    except FileNotFoundError:
        raise ExplorerError(f"command not found: {cmd[0]}") from None
    new = [s for s in find_sessions(args.output_dir) if s not in before] if Path(args.output_dir).is_dir() else []
    if new:
        print(f"neuron-explorer: captured {len(new)} session(s) in {args.output_dir} ({time.time() - started:.1f} s); "
              f"view with: neuron-explorer view -d {args.output_dir}", file=sys.stderr)
    else:
        print(f"neuron-explorer: the command wrote no profile to {args.output_dir}: it ran no Python with neuron-explorer "
              f"installed, or launched no work on the NeuronCore", file=sys.stderr)
    return code


# --- view ----------------------------------------------------------------------------------------
def _profiles(args) -> list[Profile]:
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    if args.neff and not args.session:
        out = args.output_dir or tempfile.mkdtemp(prefix="neuron-explorer-")
        return [open_profile(session_from_neff(args.neff, out), progress=progress)]
    where = args.session or args.directory or os.environ.get(capture_env.OUTPUT_DIR_ENV) or capture_env.DEFAULT_OUTPUT_DIR
    path = Path(where)
    if (path / "Metadata.parquet").is_file():
        return [Profile(path)]
    sessions = find_sessions(path)
    if not sessions:
        raise ExplorerError(f"{path} holds no capture session or profile (capture one with neuron-explorer inspect, "
                            f"NEURON_RT_INSPECT_ENABLE=1 or torch_neuronx.profiling)")
    profiles = []
    for session in sessions:
        if args.reingest or args.ignore_device_profile or args.display_name:
            profiles.append(Profile(ingest(session, display_name=args.display_name,
                                           ignore_device_profile=args.ignore_device_profile, progress=progress)))
        else:
            profiles.append(open_profile(session, progress=progress))
    return profiles


def _view(args) -> int:
    if args.neff and args.directory:
        raise ExplorerError("give -n with -s (its session), or -d alone")
    profiles = _profiles(args)
    for profile in profiles:
        print(f"profile {profile.name!r}: {profile.path}", file=sys.stderr)
    if args.output_format == "summary-text":
        for profile in profiles:
            sys.stdout.write(summary_text(profile))
        return 0
    if args.output_format != "parquet":
        for profile in profiles:
            out = Path(args.output_dir) if args.output_dir else (profile.session_dir or profile.path)
            for path in export(profile, args.output_format, out if len(profiles) == 1 else out / profile.path.parent.name):
                print(path)
        return 0
    if args.ingest_only:
        for profile in profiles:
            print(profile.path)
        return 0
    return _serve(args, profiles)


def _serve(args, profiles: list[Profile]) -> int:
    token = args.token
    loopback = args.host in ("127.0.0.1", "localhost", "::1")
    if token == "auto" or (token is None and not loopback and not args.no_token):
        token = new_token()
    roots = [Path(r) for r in args.framework_source_root + args.nki_source_root]
    for root in roots:
        if not root.is_dir():
            raise ExplorerError(f"source root {root} is not a directory")
    server = ExplorerServer(Explorer(profiles, roots), args.host, args.port, token)
    url = server.url
    if args.neff and args.session:  # open the device trace at the first execution of that NEFF's program
        url += ("&" if "?" in url else "?") + f"neff={neff_file_stem(Neff.load(args.neff).program.name)}#/device?p=0"
    print(f"View the profile{'s' if len(profiles) > 1 else ''} at {url}\nctrl-c to exit", flush=True)
    if args.open:
        webbrowser.open(url)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
