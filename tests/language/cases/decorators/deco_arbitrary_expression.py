buttons = [lambda f: (print("btn0"), f)[1], lambda f: f]
@buttons[0]
def handler(): return "h"
print(handler())
