"""The suites' pytest harness: rows from rows.json, one fresh process per test item, JUnit as the truth.

Importable without `ci/` (the image carries `suites/`, not the orchestration) and cheap to import:
the JIT sentinel's start-up hook may import this package in every Python process, so nothing heavy
(pytest, torch, triton) is imported here.
"""
