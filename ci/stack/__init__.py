"""Stage 1, the stack: `stack/*.yaml` loaded once into a typed model, the eligibility rules, and the plan
(every row to prove, with a stable id) as the seed table and as rows.json, the container's one input."""
