try: {}[(1, 2)]
except KeyError as e: print(e, repr(e), e.args)
