#!/usr/bin/env python3
"""seed.py - (re)write the seed corpora tests/fuzz/corpus/<harness>/ from the
fixtures, the unit tests' data and a few hand-made inputs (wire formats are
encoded here as coll/tcp/wire.h and coll/nccl_boot.h describe them). Run from the
repository root; the result is committed, so the test command needs no Python.

Besides these seed-* files the committed corpora hold what longer fuzzing runs
found that adds coverage (merged with `HARNESS -merge=1 tests/fuzz/corpus/NAME
GROWN_DIR`), so the 20 s runs of the test command replay it."""
import glob, hashlib, os, struct, sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = os.path.join(root, "tests/fuzz/corpus")

def put(harness, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(out, harness)
    os.makedirs(d, exist_ok=True)
    name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

def files(pattern):
    for p in sorted(glob.glob(os.path.join(root, pattern), recursive=True)):
        with open(p, "rb") as f:
            yield f.read()

for d in files("tests/unit/data/hostfile/*.json"):
    put("fuzz_hostfile", d)
for d in files("fixtures/*/*/system_profiler.json"):
    put("fuzz_system_profiler", d)
for d in files("fixtures/*/*/networksetup.txt"):
    put("fuzz_networksetup", d)
put("fuzz_networksetup", "Routing tables\n\nInternet:\n"
    "Destination        Gateway            Flags               Netif Expire\n"
    "default            192.168.0.1        UGScg                 en0\n"
    "127                127.0.0.1          UCS                   lo0\n"
    "169.254            link#6             UCS                   en0      !\n"
    "192.168.1.4/30     link#9             UCS                   utun3\n"
    "192.168.2.1        link#12            UHLWIi                en2\n"
    "10.8/16            link#9             UCS                   utun3\n"
    "\nInternet6:\ndefault            fe80::%utun0       UGcIg               utun0\n")
for d in files("fixtures/*/*/ibv_devices.txt"):
    put("fuzz_ibv_devices", d)
put("fuzz_ibv_devices", "No IB devices found\n")

put("fuzz_ssh_config", "# global part\nConnectTimeout 7\n\nHost h1 h2 \"h 3\" \"h_3\"\n"
    "    HostName 10.0.0.%h-x\n    User alice\n    Port=2222\n    IdentityFile ~/.ssh/id_h\n"
    "Host !h2 h*\n    HostName ignored-for-h1\n    User bob\n    IdentityFile /keys/%r@%h\n"
    "    StrictHostKeyChecking accept-new\nHost *\n    Port 22\n"
    "    UserKnownHostsFile ~/kh1 /etc/kh2\n    StrictHostKeyChecking no\n"
    "    ConnectTimeout 99\n    ForwardAgent yes\n    Unknownkeyword\n")
put("fuzz_ssh_config", "Match all\n  User u\nMatch host x\n  Port 1\nHost m?.example\n"
    "  HostName %h.lan\n  IdentityFile %d/.ssh/%u_%r\n  ConnectTimeout 500ms\n"
    "  UserKnownHostsFile none\nInclude other\n")
put("fuzz_ssh_config", "Host alice@h2 10.0.0.*\n\tHostName=\"quoted name\"\n\tPort \"22\"\n"
    "\tStrictHostKeyChecking yes\n\tIdentityFile ~alice/id\n\tIdentityFile ~root/id\n")

for dest in ("alice@m1", "root@10.0.0.1", "fe80::1", "-oProxyCommand=x", "a@b@c", "m1.example"):
    put("fuzz_ssh_config", dest + "\nHost m1\n  HostName 10.0.0.1\n")

def argv(tool, *args):
    return bytes([0 if tool == "meshrun" else 1]) + b"\0".join(a.encode() for a in args)
put("fuzz_opt", argv("meshrun", "--hostfile", "h.json", "--backend", "ring", "-n", "2",
                     "--env", "A=B", "--timeout", "1.5s", "--", "python", "x.py"))
put("fuzz_opt", argv("meshrun", "--hosts=127.0.0.1,h2", "-p32323", "--connections-per-ip", "2",
                     "--stdin", "0", "--tag-output", "-v", "--no-verify-script", "--mpi-arg",
                     "-x", "--launcher", "srun", "prog"))
put("fuzz_opt", argv("meshrun", "--print-python", "--python", "/usr/bin/python3"))
put("fuzz_opt", argv("meshrun", "--outp", "--help"))
put("fuzz_opt", argv("meshconfig", "--hosts", "m1,m2,m3", "--over", "thunderbolt", "--auto-setup",
                     "--output-hostfile", "o.json", "--env", "X=1", "--timeout", "200ms", "--dot"))
put("fuzz_opt", argv("meshconfig", "--simulate", "fixtures/ring4", "--backend=jaccl-ring",
                     "--ssh-config", "c", "--known-hosts", "k", "--accept-new-hostkeys", "--verbose",
                     "--png", "x.png", "--ignore-unreachable", "--version"))

put("fuzz_mlx_hostfile", '[["10.0.0.1:5000","10.0.0.1:5001"],["10.0.0.2:5000","10.0.0.2:5001"]]')
put("fuzz_mlx_hostfile", '["127.0.0.1:32323", "127.0.0.1:32324", "127.0.0.1:32325"]')
put("fuzz_mlx_hostfile", '[["[::1]:5000"],["[fe80::1]:5001"]]')
for v in ("10.0.0.1:5000", "[::1]:65535", "3", "1.5", "500ms", "512K", "256M", "system", "0123456789abcdef0123456789abcdef"):
    put("fuzz_mlx_hostfile", v)

put("fuzz_ibv_matrix", '[[null,"rdma_en2","rdma_en3"],["rdma_en2",null,"rdma_en4"],["rdma_en3","rdma_en4",null]]')
put("fuzz_ibv_matrix", '[[null,["rdma_en2","rdma_en3"],null,["rdma_en4","rdma_en5"]],'
    '[["rdma_en2","rdma_en3"],null,["rdma_en4","rdma_en5"],null],'
    '[null,["rdma_en2","rdma_en3"],null,["rdma_en4","rdma_en5"]],'
    '[["rdma_en2","rdma_en3"],null,["rdma_en4","rdma_en5"],null]]')
put("fuzz_ibv_matrix", '[[null,"rdma_en2"],["rdma_en2",null]]')
put("fuzz_mesh_hostfile", '[[null,"10.0.0.1:5000"],["10.0.0.2:5000",null]]')
put("fuzz_mesh_hostfile", '[[null,["192.168.0.1:5000","192.168.0.5:5000"],"192.168.0.9:5000"],'
    '[["192.168.0.2:5000","192.168.0.6:5000"],null,"192.168.0.13:5000"],'
    '["192.168.0.10:5000","192.168.0.14:5000",null]]')
put("fuzz_mesh_hostfile", '[[null,"[::1]:5000"],["[::1]:5001",null]]')

def hello(lane, rank, size, nconn, token, version=1):
    return (b"MRNG" + struct.pack("<HHIIIHH", version, lane, rank, size, nconn, len(token), 0) + token)
def frame(t, src, dst, n):
    return struct.pack("<B3xIIIQ", t, src, dst, 0, n)
tok = b"0123456789abcdef0123456789abcdef"
put("fuzz_ring_wire", bytes([2, 0, 2, 31]) + hello(0, 2, 3, 1, tok) + frame(1, 0, 1, 0) + frame(2, 1, 2, 100) + frame(3, 2, 0, 20))
put("fuzz_ring_wire", bytes([1, 1, 1, 3]) + hello(0xffff, 1, 2, 2, tok) + frame(3, 1, 0, 2000))
put("fuzz_ring_wire", bytes([2, 0, 2, 0]) + hello(0, 2, 3, 1, b"wrong-job"))
put("fuzz_ring_wire", bytes([2, 0, 2, 5]) + b"GET / HTTP/1.0\r\n\r\n")
jtok = b"fedcba9876543210fedcba9876543210"
def blobs(*bs):
    return b"".join(struct.pack("<I", len(b)) + b for b in bs)
put("fuzz_jaccl_side", bytes([2, 0]) + hello(0xffff, 1, 3, 0x4a43434c, jtok) + frame(2, 1, 0, 40) + frame(3, 2, 0, 10) + blobs(b"a" * 8, b"bb", b""))
put("fuzz_jaccl_side", bytes([1, 2]) + hello(0xffff, 1, 2, 0x4a43434c, jtok) + blobs(b"x", b"yz"))
put("fuzz_jaccl_side", bytes([3, 0]) + hello(0xffff, 3, 4, 0x4a43434c, b"other") + blobs(b"", b"", b"", b""))
def req(rank, size, token):
    return b"MRNB" + struct.pack("<HHII", 1, len(token), rank, size) + token
def reply(status, n):
    return b"MRNB" + struct.pack("<HHI", 1, status, n)
ntok = b"0123456789abcdef"
put("fuzz_nccl_boot", bytes([3, 1]) + req(1, 4, ntok) + reply(0, 128))
put("fuzz_nccl_boot", bytes([3, 3]) + req(1, 4, ntok) + reply(4, 0))
put("fuzz_nccl_boot", bytes([1, 0]) + req(1, 2, b"wrong") + reply(1, 0))
put("fuzz_nccl_boot", bytes([1, 0]) + b"GET / HTTP/1.0\r\n\r\n" + reply(0, 127))
