from ci.common.startup import Held

held = Held()  # a Ctrl-C while the command line's modules import: taken up by cli.main once they have

from ci.cli import run  # noqa: E402

run(held)
