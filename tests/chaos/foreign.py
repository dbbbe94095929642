#!/usr/bin/env python3
"""foreign.py - the chaos campaign's foreign connections (tests/chaos/chaos.sh):
garbage bytes, a half-open connection, a wrong job token or a slow-loris hello,
aimed at every port the target rank listens on, whatever its backend (the ring
listens on 32323+r, libmeshrun's TCP mesh on the ports of MESHRUN_MESH_HOSTFILE,
only towards higher ranks), and only while it listens: libmeshrun closes its
listeners once its lanes are up (coll/tcp/conn.c), so a connection made later is
refused and proves nothing.

  foreign.py MODE TARGET_NS PEER_NS,... PROG,... DELAY_MS HELLO_RANK SIZE GARBAGE_HEX GO_FILE

Waits (up to 20 s) for a process of one of PROGs in the network namespace
TARGET_NS (the rank) and for its listening TCP sockets (read from
/proc/PID/net/tcp and /proc/PID/fd: the rank's own sockets, no ss, no netns
exec), then DELAY_MS more, then connects to each from the PEER_NS (first
preferred) whose addresses share the listener's subnet (a cable's other end),
and does MODE on each, then creates GO_FILE (the campaign holds the other ranks'
start until it exists, so that the target still listens). A connection counts as hit when the rank accepted it:
its socket appeared among the rank's descriptors, or the rank closed it (a FIN;
or a reset while the listener was still open: a connection still in the
listen backlog is reset only when the listener closes). Prints one line, then
stays (the connections held open, slow-loris still trickling) until killed:
  hit PORT,... of PORT,...      at least one accepted
  missed WHY                    none (no rank, no listener, refused, not accepted)
Root (setns into /run/netns/PEER_NS).
"""
import ctypes
import ipaddress
import os
import socket
import struct
import subprocess
import sys
import time

CLONE_NEWNET = 0x40000000


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def ns_pids(ns):
    r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split() if p.isdigit()]


def find_rank(ns, progs):
    for p in ns_pids(ns):
        try:
            argv0 = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")[0].decode()
        except OSError:
            continue
        if argv0 in progs:
            return p
    return None


def fd_inodes(pid):
    out = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                t = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if t.startswith("socket:["):
                out.add(int(t[8:-1]))
    except OSError:
        return None
    return out


def hexaddr(s):
    ip, port = s.split(":")
    return str(ipaddress.IPv4Address(struct.pack("<I", int(ip, 16)))), int(port, 16)


def tcp_table(pid):
    """(local, remote, state, inode) of every IPv4 TCP socket in pid's netns."""
    rows = []
    try:
        with open(f"/proc/{pid}/net/tcp") as f:
            next(f)
            for line in f:
                c = line.split()
                rows.append((hexaddr(c[1]), hexaddr(c[2]), c[3], int(c[9])))
    except (OSError, StopIteration):
        return None
    return rows


def listeners(pid):
    fds, tab = fd_inodes(pid), tcp_table(pid)
    if fds is None or tab is None:
        return None
    return sorted({loc for loc, _, st, ino in tab if st == "0A" and ino in fds})


def ns_nets(ns):
    r = subprocess.run(["ip", "-n", ns, "-4", "-o", "addr", "show"], capture_output=True, text=True)
    return [ipaddress.IPv4Interface(w[3]).network for w in (l.split() for l in r.stdout.splitlines()) if len(w) > 3]


def connect_from(ns, addr, port):
    libc = ctypes.CDLL(None, use_errno=True)
    here = os.open("/proc/self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(there, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {ns}")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        libc.setns(here, CLONE_NEWNET)
    finally:
        os.close(there)
        os.close(here)
    s.settimeout(1.0)
    try:
        s.connect((addr, port))
    except OSError as e:
        s.close()
        return None, e.strerror or str(e)
    s.setblocking(False)
    return s, None


def main():
    mode, tns, peers, progs, delay_ms, hrank, size, garbage, go = sys.argv[1:10]
    try:
        return run(mode, tns, peers, progs, delay_ms, hrank, size, garbage, go)
    finally:
        release(go)


def release(go):
    try:
        open(go, "w").close()
    except OSError:
        pass


def run(mode, tns, peers, progs, delay_ms, hrank, size, garbage, go):
    peers = peers.split(",")
    progs = set(progs.split(","))
    token = b"chaos-wrong-token-0123456789abcd"
    hello = b"MRNG" + struct.pack("<IIIII", 1, int(hrank), int(size), 1, len(token)) + token
    nets = {ns: ns_nets(ns) for ns in peers}
    end = time.monotonic() + 20
    pid = lst = None
    seen = False
    while time.monotonic() < end:
        pid = pid or find_rank(tns, progs)
        if pid:
            seen = True
            lst = listeners(pid)
            if lst is None:
                break  # the rank is gone: the job ended before it listened
            if lst:
                break
        time.sleep(0.003)
    if not pid or not lst:
        release(go)
        say("missed " + ("no listening port" if seen else "no rank process"))
        return hold([])
    time.sleep(int(delay_ms) / 1000)
    conns, why = [], []
    for addr, port in lst:
        a = addr
        if a == "0.0.0.0":
            a = str(next(iter(nets[peers[0]]), "0.0.0.0"))
        src = next((ns for ns in peers if any(ipaddress.IPv4Address(a) in n for n in nets[ns])), peers[0])
        s, err = connect_from(src, a, port)
        if not s:
            why.append(f"{port}: {err}")
            continue
        loc = s.getsockname()
        conns.append({"s": s, "port": port, "addr": a, "src": loc, "hit": False, "done": False})
        try:
            if mode == "garbage":
                s.send(bytes.fromhex(garbage))
            elif mode == "badtoken":
                s.send(hello)
            elif mode == "slowloris":
                s.send(hello[:1])
        except OSError:
            pass
    decide(pid, conns, lst)
    release(go)
    ports = ",".join(str(p) for _, p in lst)
    got = [c for c in conns if c["hit"]]
    if got:
        say(f"hit {','.join(str(c['port']) for c in got)} of {ports}")
    else:
        say(f"missed not accepted ({ports}){': ' + '; '.join(why) if why else ''}")
    return hold(conns, hello if mode == "slowloris" else b"")


def decide(pid, conns, lst):
    """Up to 1 s: which connections the rank accepted (within ms while it
    listens: the other ranks are held until then)."""
    end = time.monotonic() + 1
    while time.monotonic() < end and not all(c["done"] for c in conns):
        reset = []
        for c in conns:
            if c["done"]:
                continue
            try:
                if c["s"].recv(1, socket.MSG_PEEK) == b"":
                    c["hit"] = c["done"] = True  # the rank closed it: it had accepted it
            except BlockingIOError:
                pass
            except OSError:
                reset.append(c)
        # read after the probe: a reset sent because the listener closed
        # comes after the listener is gone from the table
        fds, tab = fd_inodes(pid), tcp_table(pid)
        if fds is None or tab is None:
            break
        open_ports = {loc[1] for loc, _, st, ino in tab if st == "0A" and ino in fds}
        for c in reset:
            # reset by the rank (it closed with our bytes unread) while it
            # still listens; else by the listener's close (never accepted)
            c["hit"] = c["port"] in open_ports
            c["done"] = True
        for c in conns:
            if c["done"]:
                continue
            if any(loc == (c["addr"], c["port"]) and rem == c["src"] and ino in fds for loc, rem, _, ino in tab):
                c["hit"] = c["done"] = True
        time.sleep(0.002)


def hold(conns, hello=b""):
    for i in range(1, len(hello)):
        time.sleep(0.5)
        for c in conns:
            try:
                c["s"].send(hello[i:i + 1])
            except OSError:
                pass
    time.sleep(60)


if __name__ == "__main__":
    main()
