def register(cls):
    cls.registered = True
    return cls
@register
class C: pass
print(C.registered)
