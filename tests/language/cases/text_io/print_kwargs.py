# restricted: refused (module sys is not importable)
import sys
print("a", "b", sep="")
print(1, 2, 3, sep=", ", end=" <end>\n")
print()
print(*[1, 2], *"xy")
sys.stdout.write("raw write\n")
print("flushed", flush=True)
