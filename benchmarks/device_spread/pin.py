"""pin.py CPUS cmd...: run cmd on CPUS (e.g. 0,1 or 0-7), as taskset -c would."""
import os
import sys

cpus = set()
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    cpus.update(range(int(a), int(b or a) + 1))
os.sched_setaffinity(0, cpus)
os.execvp(sys.argv[2], sys.argv[2:])
