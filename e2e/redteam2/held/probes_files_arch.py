import ctypes, json, mmap, os, struct, sys
OUT = os.environ.get("MCPSIDECAR_OUTPUT_DIR", "/sandbox-output")
def rt(pname, **kw):
    kw["probe"] = pname; print("RT " + json.dumps(kw), flush=True)
libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long
# FIFOs / special files in the output directory
for name in ("fifo", "answer.txt", "agent-turns.jsonl", "report.json"):
    try:
        os.mkfifo(os.path.join(OUT, name)); rt("mkfifo", name=name, ok=True)
    except OSError as e:
        rt("mkfifo", name=name, ok=False, err=str(e))
try:
    with open(os.path.join(OUT, "a"), "w") as f: f.write("x")
    os.link(os.path.join(OUT, "a"), os.path.join(OUT, "b")); rt("hardlink_same_dir", ok=True)
except OSError as e:
    rt("hardlink_same_dir", ok=False, err=str(e))
try:
    os.link("/app/probes_files_arch.py", os.path.join(OUT, "c")); rt("hardlink_from_image", ok=True)
except OSError as e:
    rt("hardlink_from_image", ok=False, err=str(e))
# x32 execve and i386 execve (int 0x80), each in a forked child
def child(fn):
    pid = os.fork()
    if pid == 0:
        try:
            r = fn(); os.write(1, ("RT " + json.dumps({"probe": fn.__name__, "ret": r, "errno": ctypes.get_errno()}) + "\n").encode())
        finally:
            os._exit(0)
    _, st = os.waitpid(pid, 0)
    rt(fn.__name__ + ".status", status=st, signaled=os.WIFSIGNALED(st), sig=os.WTERMSIG(st) if os.WIFSIGNALED(st) else None)
def x32_execve():
    path = ctypes.c_char_p(b"/usr/bin/python3")
    argv = (ctypes.c_char_p * 3)(b"python3", b"-c", None)
    return libc.syscall(ctypes.c_long(0x40000000 | 520), path, argv, None)  # x32 execve is 520
def i386_execve():
    MAP_32BIT = 0x40
    addr = libc.mmap(None, 4096, 7, 0x22 | MAP_32BIT, -1, 0)
    libc.mmap.restype = ctypes.c_void_p
    addr = libc.mmap(None, 4096, 7, 0x22 | MAP_32BIT, -1, 0)
    path = b"/usr/bin/python3\x00"
    code = (b"\xb8\x0b\x00\x00\x00" + b"\xbb" + struct.pack("<I", addr + 0x100) + b"\x31\xc9\x31\xd2\xcd\x80\xc3")
    ctypes.memmove(addr, code, len(code)); ctypes.memmove(addr + 0x100, path, len(path))
    return ctypes.CFUNCTYPE(ctypes.c_long)(addr)()
def i386_getpid():
    libc.mmap.restype = ctypes.c_void_p
    addr = libc.mmap(None, 4096, 7, 0x22 | 0x40, -1, 0)
    code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"  # getpid (20) via int 0x80
    ctypes.memmove(addr, code, len(code))
    return ctypes.CFUNCTYPE(ctypes.c_long)(addr)()
for f in (x32_execve, i386_getpid, i386_execve):
    child(f)
rt("end")
