"""Each imported change's upstream and rebase state in a real fork checkout, from git alone (`ci upstream`)."""
