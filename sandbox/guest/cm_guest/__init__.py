"""The guest runtime: runs inside the sandbox component, standard library only (DESIGN.md §3)."""
