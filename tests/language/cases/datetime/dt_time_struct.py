import time
print(time.gmtime(0), time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(86400 * 365)), time.mktime is not None)
