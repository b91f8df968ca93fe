"""What tests in unit/ and integration/ share: worlds made by git, report inputs, the fault suite, the repo's paths.

tests/conftest.py sits beside this package, so pytest puts tests/ on sys.path and `support` imports from either folder.
"""
