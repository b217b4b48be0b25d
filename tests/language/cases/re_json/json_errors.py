# restricted: skip before 3.13 (the host's CPython before 3.13 prints differently from 3.14)
import json
for bad in ['{"a": 1,}', "[1, 2", "nan", "{'a': 1}", '"\\x"', ""]:
    try: json.loads(bad)
    except json.JSONDecodeError as e: print(repr(bad), "->", e)
try: json.dumps({"s": {1, 2}})
except TypeError as e: print(e)
try: json.dumps(float("nan"), allow_nan=False)
except ValueError as e: print(e)
