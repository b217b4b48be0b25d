class AppError(Exception):
    def __init__(self, code, msg):
        super().__init__(msg); self.code = code
class NotFound(AppError): pass
try: raise NotFound(404, "nope")
except AppError as e: print(type(e).__name__, e.code, e, e.args, repr(e))
