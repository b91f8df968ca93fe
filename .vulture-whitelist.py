# Names vulture cannot see used: each is reached by a framework, by name, or from outside the process.
# vulture ci suites .vulture-whitelist.py --min-confidence 80
