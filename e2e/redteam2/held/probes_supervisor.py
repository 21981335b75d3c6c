import json, os
def rt(p, **kw):
    kw["probe"] = p; print("RT " + json.dumps(kw), flush=True)
sup = None
for pid in os.listdir("/proc"):
    if pid.isdigit() and pid not in ("1", str(os.getpid())):
        sup = pid
rt("pids", pids=[p for p in os.listdir("/proc") if p.isdigit()], supervisor=sup)
for f in ("cmdline", "environ", "status", "maps", "mem", "fd", "root", "cwd", "fdinfo"):
    p = f"/proc/{sup}/{f}"
    try:
        if f in ("fd", "fdinfo", "root"):
            rt("sup." + f, ok=True, v=os.listdir(p))
        else:
            with open(p, "rb") as h:
                rt("sup." + f, ok=True, v=h.read(400).decode(errors="replace"))
    except OSError as e:
        rt("sup." + f, ok=False, err=str(e))
for n in range(0, 8):
    p = f"/proc/{sup}/fd/{n}"
    try:
        rt("sup.fdlink", n=n, target=os.readlink(p))
        fd = os.open(p, os.O_RDONLY)
        rt("sup.fdopen", n=n, ok=True, fd=fd)
    except OSError as e:
        rt("sup.fd", n=n, ok=False, err=str(e))
try:
    os.kill(int(sup), 0); rt("sup.kill0", ok=True)
except OSError as e:
    rt("sup.kill0", ok=False, err=str(e))
try:
    os.kill(1, 0); rt("init.kill0", ok=True)
except OSError as e:
    rt("init.kill0", ok=False, err=str(e))
# pidfd of the supervisor, then pidfd_send_signal(SIGSTOP): would freeze the supervisor (every later exec hangs)
import ctypes
libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long
pfd = libc.syscall(434, int(sup), 0)
rt("sup.pidfd_open", fd=pfd, errno=ctypes.get_errno())
if pfd >= 0:
    r = libc.syscall(424, pfd, 19, None, 0)
    rt("sup.pidfd_send_signal_STOP", r=r, errno=ctypes.get_errno())
    r = libc.syscall(438, pfd, 3, 0)  # pidfd_getfd
    rt("sup.pidfd_getfd", r=r, errno=ctypes.get_errno())
