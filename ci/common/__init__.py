"""What every stage stands on, importing none of them: the exception family and exit codes (`errors`), options defined
once (`options`), plain tables (`tables`), this checkout's git facts (`revision`), signals, a command's first and last
moments (`startup`, `teardown`), the second CPU (`second_cpu`), data from elsewhere read, checked and printed (`files`,
`owned`, `untrusted`, `escape`), the one place git runs (`git`), and the names both sides of the boundary spell
(`contract`)."""
