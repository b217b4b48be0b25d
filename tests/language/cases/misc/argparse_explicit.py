# restricted: refused (module argparse is not importable)
import argparse
p = argparse.ArgumentParser(prog="tool", exit_on_error=False)
p.add_argument("files", nargs="+"); p.add_argument("-n", type=int, default=1); p.add_argument("--verbose", "-v", action="count", default=0)
print(p.parse_args(["a", "b", "-n", "3", "-vv"]))
print(p.format_usage(), end="")
try: p.parse_args(["-n", "x", "f"])
except argparse.ArgumentError as e: print(e)
