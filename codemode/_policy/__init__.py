"""The policy file: tier, limits, exposed tools and per-tool rules (`policy`), read from a
file with a size bound (`bounded`). Above the run, whose `CodeMode` a policy configures.

Empty on purpose: importing one module loads no other (`codemode` loads on first use).
"""
