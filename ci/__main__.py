import sys

try:
    from ci.cli import run
except KeyboardInterrupt:  # Ctrl-C while the command line's modules import: said as cli.main says it later
    print("stopped by SIGINT before anything ran", file=sys.stderr)
    sys.exit(130)

run()
