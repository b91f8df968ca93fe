"""Which model may enter which track, and on which target.

A model is eligible only for tracks whose requirements its own traits meet (drafter type, attention
layout, quantization, backend); nothing carries over between tracks. Each function returns the
reason a pairing is refused, or None when it is allowed, so the plan can say why a row is absent.
"""

from __future__ import annotations

from ci.stack.model import Backend, Model, Target, Track


def trait_mismatch(model: Model, track: Track) -> str | None:
    """Why `model`'s traits can never satisfy `track`, whatever the target. None if they can."""
    req = track.requires
    drafter = model.drafter.type if model.drafter else "none"
    if req.drafter is not None and drafter not in req.drafter:
        return f"drafter {drafter} is not one of {', '.join(req.drafter)}"
    if req.attention is not None and model.attention.layout not in req.attention:
        return f"attention {model.attention.layout} is not one of {', '.join(req.attention)}"
    if req.quantization is not None and model.quantization not in req.quantization:
        return f"quantization {model.quantization} is not one of {', '.join(req.quantization)}"
    if req.backend is not None and not set(model.backends) & set(req.backend):
        return f"none of its backends ({', '.join(model.backends)}) is one of {', '.join(req.backend)}"
    return None


def pending_proof(model: Model, track: Track) -> str | None:
    """Why an otherwise matching model waits: its attention representation is not proven yet."""
    if track.requires.attention_proven and not model.attention.proven:
        note = f" ({model.attention.note})" if model.attention.note else ""
        return f"attention representation not proven for this implementation{note}"
    return None


def row_backends(model: Model, track: Track, target: Target) -> tuple[str, ...]:
    """The backends a row may select: the model's, admitted by the track, offered by the target."""
    allowed = set(track.requires.backend) if track.requires.backend is not None else None
    offered = set(target.backends)
    return tuple(b for b in model.backends if b in offered and (allowed is None or b in allowed))


def target_mismatch(model: Model, track: Track, target: Target) -> str | None:
    """Why `model` cannot run `track` on `target`. None if at least one backend can."""
    if model.quantization not in target.quantizations:
        return f"{target.id} does not run {model.quantization} weights"
    if not row_backends(model, track, target):
        return f"no backend of {model.id} for this track is offered by {target.id}"
    return None


def kv_supported(backend: Backend, kv_cache_dtype: str) -> bool:
    return kv_cache_dtype in backend.kv_cache_dtypes


def model_kv(model: Model, kv_cache_dtype: str) -> str | None:
    """The KV dtype a row of `model` runs for the matrix's `kv_cache_dtype`: that one where vLLM accepts it for the
    model; for "auto" (vLLM's default) on a model that refuses it, the model's own first; else None (refused)."""
    accepted = model.kv_cache_dtypes
    if accepted is None or kv_cache_dtype in accepted:
        return kv_cache_dtype
    return accepted[0] if kv_cache_dtype == "auto" else None
