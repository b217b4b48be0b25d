try:
    print([i for i in range(3)][i])
except NameError as e:
    print(e)
