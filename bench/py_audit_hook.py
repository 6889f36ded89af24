"""The cost of the shim's audit hook (docs/performance.md, issue 21): run it
with and without LD_PRELOAD=libtrshim.so (TRSHIM_PYSTACK_DEPTH=0: no hook)."""
import sys, time
def best(f, n):
    r = []
    for _ in range(7):
        t = time.perf_counter(); f(n); r.append(time.perf_counter() - t)
    return min(r) / n * 1e9
def opens(n):
    for i in range(n): open("/dev/null").close()
def audits(n):
    a = sys.audit
    for i in range(n): a("bench.event", i)
print("open+close %.0f ns, sys.audit(ev, i) %.0f ns" % (best(opens, 20000), best(audits, 200000)))
