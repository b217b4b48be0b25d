# restricted: refused (underscore name __init_subclass__)
class Plugin:
    registry = []
    def __init_subclass__(cls, name=None, **kw):
        super().__init_subclass__(**kw)
        Plugin.registry.append(name or cls.__name__)
class A(Plugin, name="alpha"): pass
class B(Plugin): pass
print(Plugin.registry)
