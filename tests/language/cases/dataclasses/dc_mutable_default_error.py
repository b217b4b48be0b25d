from dataclasses import dataclass
try:
    @dataclass
    class Bad:
        xs: list = []
except ValueError as e:
    print(e)
