"""The report's sections, one module each, drawn from the report's tables (`ci.report.view`) and rendered by `markdown`,
`html` and `json_doc`: the first screen (`first_screen`), each change's verdict per target (`at_target`), what was
judged and each change as the fork holds it (`in_fork`), a lacking change's port as its next step (`port_step`), its
rebase state (`rebase`), failing rows for triage (`triage`), the composition rows in the seed table's shape
(`combinations`), each model beside its shrunk twin (`model_pairs`), the `--compare` section (`comparison`,
`comparison_json`) and this build beside its history (`across_view`, `across_json`)."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = []  # none: the report draws its sections itself
