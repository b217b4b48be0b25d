# restricted: refused (module logging is not importable)
import logging, sys
h = logging.StreamHandler(sys.stdout); h.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
log = logging.getLogger("app"); log.addHandler(h); log.setLevel(logging.INFO); log.propagate = False
log.debug("hidden"); log.info("shown %d", 1); log.warning("warn %s", "x")
try: 1 / 0
except ZeroDivisionError: log.exception("failed")
child = logging.getLogger("app.db"); child.error("child msg")
