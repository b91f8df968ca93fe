"""Which testcases a test named in the stack (`acceptance.regression.tests`) stands for.

The suites run with suites/ as pytest's rootdir, so "suites/x/test_y.py::f" is JUnit classname "x.test_y",
name "f" or "f[<row id>]".
"""

from __future__ import annotations

from collections.abc import Callable

from ci.results.junit import Case


def test_module(test: str) -> str:
    """The JUnit classname prefix of a test named in the stack ("suites/x/test_y.py::f" -> "x.test_y"):
    the suites run with suites/ as pytest's rootdir."""
    path = test.partition("::")[0].removeprefix("suites/")
    return path.removesuffix(".py").replace("/", ".")


def matcher(test: str) -> Callable[[Case], bool]:
    """Whether a case is (part of) the pytest node id or file `test` names: the node id taken apart once, for the
    many cases it is matched against."""
    path, _, rest = test.partition("::")
    path = path.removeprefix("suites/")
    module = test_module(test)
    dotted = module + "."
    *classes, func = rest.split("::") if rest else ("",)
    nested = ".".join(classes)

    def match(case: Case) -> bool:
        in_module = case.path.lstrip("./") == path if case.path else False
        in_module = in_module or case.classname == module or case.classname.startswith(dotted)
        if not in_module or not rest:
            return in_module
        inner = case.classname[len(dotted) :] if case.classname.startswith(dotted) else ""
        return case.name.split("[", 1)[0] == func and (not classes or inner == nested)

    return match
