import sys

try:
    from ci.cli import run
except (KeyboardInterrupt, RuntimeError) as exc:  # Ctrl-C while the command line's modules import: said as cli.main
    if not isinstance(exc, KeyboardInterrupt) and not isinstance(exc.__cause__, KeyboardInterrupt):
        raise  # (3.11 wraps one landing in a class body's __set_name__ in a RuntimeError, its cause)
    print("stopped by SIGINT before anything ran", file=sys.stderr)
    sys.exit(130)

run()
