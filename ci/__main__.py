from ci.cli import run

run()
