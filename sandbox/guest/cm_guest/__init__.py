"""The guest runtime: runs inside the sandbox component, standard library only (docs/design.md
§3)."""
