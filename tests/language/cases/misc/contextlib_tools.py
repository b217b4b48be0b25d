# restricted: refused (module 'contextlib' has no attribute 'redirect_stdout' (not exposed))
import contextlib, io
with contextlib.suppress(KeyError): {}["x"]
buf = io.StringIO()
with contextlib.redirect_stdout(buf): print("captured")
print(repr(buf.getvalue()))
@contextlib.contextmanager
def tag(n):
    print(f"<{n}>"); yield n; print(f"</{n}>")
with contextlib.ExitStack() as st:
    for n in "ab": st.enter_context(tag(n))
    st.callback(print, "callback")
with contextlib.nullcontext(5) as v: print(v)
