# restricted: refused (match statement)
cmds = ["go north", "take lamp", "drop", "look around now"]
for c in cmds:
    match c.split():
        case ["go", ("north" | "south") as d]: print("move", d)
        case ["take", obj]: print("take", obj)
        case [verb]: print("bare", verb)
        case [verb, *args]: print(verb, args)
