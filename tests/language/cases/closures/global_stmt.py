counter = 0
def bump():
    global counter
    counter += 10
bump(); bump(); print(counter)
