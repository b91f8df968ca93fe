"""Stage 1, the stack: `stack/*.yaml` loaded once into a typed model, the eligibility rules, and the plan
(every row to prove, with a stable id) as the seed table and as rows.json, the container's one input."""

# The modules other stages and the commands on top may import; the rest are this stage's own (test_layers).
__all__ = ["change", "flaky", "loader", "meaning", "model", "plan", "rows_json", "seed_table", "yaml_lines"]
