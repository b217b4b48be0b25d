# restricted: refused (match statement)
match = [1, 2]
case = 3
match match:
    case [_, 2]: print("soft", case)
