"""The building blocks of the stack's typed model: frozen, keyword-only dataclasses that pydantic validates
strictly (unknown keys are errors), and the closed vocabularies the YAML may use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

Family = Literal["cuda", "rocm", "cpu"]
Platform = Literal["linux/amd64", "linux/arm64"]
Layout = Literal["dense", "hybrid", "mla", "sparse_mla"]
DrafterType = Literal["eagle", "eagle3", "dflash", "dspark", "mtp"]
GraphMode = Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]

# Numbers a criterion compares against: finite (NaN compares false both ways and would let anything pass).
Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(gt=0)]
# A git commit id, whole or abbreviated to at least 7 hex digits (SHA-1 or SHA-256), lower case as git prints it.
_COMMIT, _PATCH_ID = r"^[0-9a-f]{7,64}$", r"^([0-9a-f]{40}|[0-9a-f]{64})$"
CommitId = Annotated[str, Field(pattern=_COMMIT)]
PatchId = Annotated[str, Field(pattern=_PATCH_ID)]  # git patch-id's output
PATTERNS = {_COMMIT: "a commit id (7 to 64 lower-case hex digits)", _PATCH_ID: "a patch-id (40 or 64 hex digits)"}

_STRICT = ConfigDict(extra="forbid")


def frozen(cls: type) -> type:
    cls.__pydantic_config__ = _STRICT  # type: ignore[attr-defined]
    return dataclass(frozen=True, kw_only=True)(cls)
