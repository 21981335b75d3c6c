#!/usr/bin/env python3
"""Runs as the workload. Prints one "RT2 {...}" line per check.

The image declares VOLUME /tmp/v and /sandbox-work/v. Docker mounts an
anonymous volume (host disk, exec allowed) there, inside the Landlock-writable
/tmp and /sandbox-work. The launcher statfs-checks only /tmp and /sandbox-work
themselves, so the run starts; a library written into the volume is then
mapped executable with ctypes."""
import ctypes, json, os

ST_NOEXEC = 8


class Statfs(ctypes.Structure):
    _fields_ = [("f_type", ctypes.c_long), ("f_bsize", ctypes.c_long), ("f_blocks", ctypes.c_ulong),
                ("f_bfree", ctypes.c_ulong), ("f_bavail", ctypes.c_ulong), ("f_files", ctypes.c_ulong),
                ("f_ffree", ctypes.c_ulong), ("f_fsid", ctypes.c_int * 2), ("f_namelen", ctypes.c_long),
                ("f_frsize", ctypes.c_long), ("f_flags", ctypes.c_long), ("f_spare", ctypes.c_long * 4)]


libc = ctypes.CDLL(None, use_errno=True)


def noexec(path):
    s = Statfs()
    if libc.statfs(path.encode(), ctypes.byref(s)) != 0:
        return None
    return bool(s.f_flags & ST_NOEXEC)


def rt(**kw):
    print("RT2 " + json.dumps(kw), flush=True)


for d in ("/tmp", "/sandbox-work", "/tmp/v", "/sandbox-work/v"):
    rt(check="statfs", path=d, noexec=noexec(d))
for d in ("/tmp", "/tmp/v", "/sandbox-work/v"):
    p = os.path.join(d, "written-libc.so")
    try:
        with open("/lib/x86_64-linux-gnu/libc.so.6", "rb") as src, open(p, "wb") as dst:
            dst.write(src.read())
        lib = ctypes.CDLL(p)  # mmap(PROT_EXEC) of a file the workload wrote
        rt(check="load_written_library", path=p, loaded=True, getpid=lib.getpid())
    except OSError as e:
        rt(check="load_written_library", path=p, loaded=False, error=str(e))

# The volume is on the host's disk: the 64 MiB tmpfs bound of /tmp does not apply.
n = 0
try:
    for i in range(12):
        with open(f"/tmp/v/fill{i}", "wb") as f:
            f.write(b"\0" * (8 << 20))
        n += 8
    rt(check="write_beyond_tmpfs_size", path="/tmp/v", written_mb=n)
except OSError as e:
    rt(check="write_beyond_tmpfs_size", path="/tmp/v", written_mb=n, error=str(e))
# A volume under the output directory: what is written there never reaches the run directory.
p = "/sandbox-output/sub/hidden-from-record.txt"
with open(p, "w") as f:
    f.write("written by the workload, absent from the record")
rt(check="write_output_sub_volume", path=p, written=True)
