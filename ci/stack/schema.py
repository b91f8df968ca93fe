"""The building blocks of the stack's typed model: frozen, keyword-only dataclasses that pydantic validates
strictly (unknown keys are errors), and the closed vocabularies the YAML may use.

The model's modules import nothing of pydantic: a field's constraints are `Rule`s, which pydantic reads where it
builds a validator (`validate`, the only place it is imported). A stack read back from the loader's cache
(`ci.stack.cache`) so never imports it: 0.1 CPU-seconds of every command that loads the stack."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, TypeAdapter
    from pydantic_core import CoreSchema

    from ci.stack.yaml_lines import Loc, Source


@dataclass(frozen=True)
class Rule:
    """Constraints on one field, as pydantic-core's schema for its type names them (`ge`, `gt`, `le`,
    `allow_inf_nan`, `pattern`, `min_length`, `strict`): what `Field(...)` would set, added where pydantic builds
    the field's schema, so that errors are pydantic's own (`string_pattern_mismatch` with its pattern, ...)."""

    constraints: tuple[tuple[str, object], ...]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        schema = handler(source)
        schema.update(self.constraints)  # type: ignore[typeddict-item]
        return schema


def rule(**constraints: object) -> Rule:
    return Rule(tuple(constraints.items()))


Family = Literal["cuda", "rocm", "cpu"]
Platform = Literal["linux/amd64", "linux/arm64"]
Layout = Literal["dense", "hybrid", "mla", "sparse_mla"]
DrafterType = Literal["eagle", "eagle3", "dflash", "dspark", "mtp"]
GraphMode = Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]

# Numbers a criterion compares against: finite (NaN compares false both ways and would let anything pass).
Finite = Annotated[float, rule(allow_inf_nan=False)]
NonNegative = Annotated[float, rule(ge=0, allow_inf_nan=False)]
Count = Annotated[int, rule(ge=0)]
Positive = Annotated[int, rule(gt=0)]
Gib = Annotated[float, rule(gt=0, le=1024)]
StrictBool = Annotated[bool, rule(strict=True)]  # true or false, never "yes" or 1
# A git commit id, whole or abbreviated to at least 7 hex digits (SHA-1 or SHA-256), lower case as git prints it.
_COMMIT, _PATCH_ID = r"^[0-9a-f]{7,64}$", r"^([0-9a-f]{40}|[0-9a-f]{64})$"
_REF = r"^[^-\s][^\s]*$"  # a git ref or commit as a user types it; never an option
CommitId = Annotated[str, rule(pattern=_COMMIT)]
PatchId = Annotated[str, rule(pattern=_PATCH_ID)]  # git patch-id's output
GitRef = Annotated[str, rule(pattern=_REF)]
PATTERNS = {
    _COMMIT: "a commit id (7 to 64 lower-case hex digits)",
    _PATCH_ID: "a patch-id (40 or 64 hex digits)",
    _REF: "a git ref (a branch, tag or commit id)",
}

_STRICT = {"extra": "forbid"}  # pydantic's ConfigDict: a plain dict


def frozen(cls: type) -> type:
    cls.__pydantic_config__ = _STRICT  # type: ignore[attr-defined]
    return dataclass(frozen=True, kw_only=True)(cls)


# --- validation with the YAML's own lines in every error -----------------------------------------


@functools.cache
def _adapter(typ: Any) -> TypeAdapter:
    """One adapter per type: building one costs ~10 ms (its schema), and a stack validates ~40 entries."""
    from pydantic import TypeAdapter

    return TypeAdapter(typ)


def validate(src: Source, data: Any, loc: Loc, typ: Any) -> Any:
    from pydantic import ValidationError

    try:
        return _adapter(typ).validate_python(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = (*loc, *err["loc"])
        raise src.error(where, _describe(err), hint=_hint(err)) from None


def _describe(err: dict[str, Any]) -> str:
    kind, field = err["type"], err["loc"][-1] if err["loc"] else ""
    if kind == "missing" or kind == "missing_keyword_argument":
        return f"missing required key '{field}'"
    if kind in ("unexpected_keyword_argument", "extra_forbidden"):
        return f"unknown key '{field}'"
    if kind == "string_pattern_mismatch" and err["ctx"]["pattern"] in PATTERNS:
        return f"{err.get('input')!r} is not {PATTERNS[err['ctx']['pattern']]}"
    return f"{err['msg']}; got {err.get('input')!r}"


def _hint(err: dict[str, Any]) -> str:
    if err["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
        return "check the spelling; ci/stack/model.py and ci/stack/change.py list the keys each entry accepts"
    if err["type"] in ("missing", "missing_keyword_argument"):
        return "add it; ci/stack/model.py and ci/stack/change.py document each field"
    if err["type"] == "bool_type":
        return "write true or false"
    if err["type"] == "string_type" and isinstance(err.get("input"), (int, float)):
        return "quote it: YAML read it as a number"
    return ""
