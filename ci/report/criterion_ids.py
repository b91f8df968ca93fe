"""Each acceptance criterion by a stable id, for scripts and the history: its name is English and may be reworded."""

from __future__ import annotations

from ci.results import criteria

CRITERION_IDS = {
    criteria.TIED: "tied",
    criteria.COLD_WARM: "cold_warm",
    criteria.NO_JIT: "no_jit",
    criteria.MATRIX: "matrix",
    criteria.TOLERANCE: "tolerance",
    criteria.GRAPH: "graph_replay",
    criteria.EFFECT: "effect",
    criteria.REGRESSION: "allowed_regression",
}
