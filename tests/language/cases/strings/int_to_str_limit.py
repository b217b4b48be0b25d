# restricted: refused (module sys is not importable)
import sys
try:
    str(10 ** 5000)
except ValueError as e:
    print(e)
print(sys.get_int_max_str_digits())
sys.set_int_max_str_digits(0)
print(len(str(10 ** 5000)))
