"""Which testcases a test named in the stack (`acceptance.regression.tests`) stands for.

The suites run with suites/ as pytest's rootdir, so "suites/x/test_y.py::f" is JUnit classname "x.test_y",
name "f" or "f[<row id>]".
"""

from __future__ import annotations

from ci.results.junit import Case


def test_module(test: str) -> str:
    """The JUnit classname prefix of a test named in the stack ("suites/x/test_y.py::f" -> "x.test_y"):
    the suites run with suites/ as pytest's rootdir."""
    path = test.partition("::")[0].removeprefix("suites/")
    return path.removesuffix(".py").replace("/", ".")


def matches(case: Case, test: str) -> bool:
    """Whether `case` is (part of) the pytest node id or file `test` names."""
    path, _, rest = test.partition("::")
    path = path.removeprefix("suites/")
    module = test_module(test)
    in_module = case.path.lstrip("./") == path if case.path else False
    in_module = in_module or case.classname == module or case.classname.startswith(module + ".")
    if not in_module or not rest:
        return in_module
    *classes, func = rest.split("::")
    inner = case.classname[len(module) + 1 :] if case.classname.startswith(module + ".") else ""
    return case.name.split("[", 1)[0] == func and (not classes or inner == ".".join(classes))
