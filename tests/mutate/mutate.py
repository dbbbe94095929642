#!/usr/bin/env python3
"""
tests/mutate/mutate.py - do the tests fail when the code is wrong?

Applies each named one-line bug of mutations.md to a scratch copy of the tree,
rebuilds it incrementally, runs only the tests named for that mutation and
reports it caught (a named test failed, or timed out) or missed (all passed).
Not part of the test command: a run of the whole table takes a while.

The scratch copy is a detached git worktree of a commit (default HEAD: commit
what you want measured) at --workdir (default /tmp/meshrun-mutate), with its
own build dir (build/mutate, no -Werror: a mutation may leave a variable
unused). It is kept between runs so rebuilds stay incremental; --clean removes
it. The checkout you work in is never touched; each mutated file is restored
with `git checkout` right after its tests, also on Ctrl-C.

  tests/mutate/mutate.py                 # every mutation
  tests/mutate/mutate.py stall_off ...   # only these
  tests/mutate/mutate.py --list          # the table
  tests/mutate/mutate.py --baseline      # first check the tests pass unmutated

Exit status: 0 when every mutation run was caught, 1 when one was missed or
could not be applied or built, 2 on a usage error.
Tests that create namespaces, sshds or meshsim clusters (a 'ns:' prefix in the
table) run under /tmp/meshrun-ns.lock as every developer's do, after the row's
other tests and only when those caught nothing; all work runs under nice.
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "mutations.md")
NS_LOCK = "/tmp/meshrun-ns.lock"


def parse_table(path):
    """Rows of the markdown table: | name | file | `pattern` | `replacement` | tests | why |.
    A '|' inside a cell is written '\\|' (GitHub renders it as '|' in code too)."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.startswith("| ") or line.startswith("| name ") or line.startswith("|--"):
                continue
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            if len(cells) != 6:
                sys.exit(f"{path}:{lineno}: expected 6 cells, got {len(cells)}")
            name, file, pat, rep, tests, why = cells

            def code(s, what):
                if len(s) < 2 or s[0] != "`" or s[-1] != "`":
                    sys.exit(f"{path}:{lineno}: {name}: {what} must be in backticks")
                return s[1:-1]

            rows.append({"name": name, "file": code(file, "file"), "pattern": code(pat, "pattern"),
                         "replacement": code(rep, "replacement"),
                         "tests": [t.strip().strip("`") for t in tests.split(",") if t.strip()],
                         "why": why, "line": lineno})
    names = [r["name"] for r in rows]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        sys.exit(f"{path}: duplicate names: {', '.join(sorted(dup))}")
    return rows


def run(cmd, cwd=None, log=None, timeout=None):
    """Run cmd under nice; returns (rc, output). rc 124 on timeout."""
    try:
        p = subprocess.run(["nice", "-n", "10"] + cmd, cwd=cwd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace", timeout=timeout)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), 124
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"$ {' '.join(cmd)}\n{out}\n[rc {rc}]\n")
    return rc, out


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True).stdout


def prepare(repo, work, ref, log):
    commit = git("rev-parse", "--verify", ref + "^{commit}", cwd=repo).strip()
    if not os.path.isdir(os.path.join(work, ".git")) and not os.path.isfile(os.path.join(work, ".git")):
        if os.path.exists(work):
            sys.exit(f"{work} exists and is not a worktree: remove it or pass --workdir")
        git("worktree", "add", "--detach", work, commit, cwd=repo)
    else:
        git("checkout", "--detach", "-f", commit, cwd=work)
    git("reset", "--hard", "-q", commit, cwd=work)
    build = os.path.join(work, "build", "mutate")
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        rc, out = run(["cmake", "-S", work, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                       "-DMESHRUN_WERROR=OFF"], log=log)
        if rc:
            sys.exit(f"cmake failed:\n{out[-3000:]}")
    print(f"scratch tree {work} at {commit[:12]}; building (incremental) ...", flush=True)
    rc, out = build_tree(build, log)
    if rc:
        sys.exit(f"the unmutated tree does not build:\n{out[-3000:]}")
    return build, commit


def build_tree(build, log):
    return run(["cmake", "--build", build, "-j2"], log=log)


def test_regex(names):
    return "^(" + "|".join(re.escape(n) for n in names) + ")$"


def ctest(build, names, lock, log, timeout, stop=True):
    # --stop-on-failure: one failing test is enough (a unit test fails in a
    # second where a ring test may run into its 300 s timeout)
    cmd = ["ctest", "--test-dir", build, "-R", test_regex(names), "--output-on-failure"]
    if stop:
        cmd.append("--stop-on-failure")
    if lock:
        cmd = ["flock", NS_LOCK] + cmd
    rc, out = run(cmd, log=log, timeout=timeout)
    failed = [f for f in re.findall(r"^\s*\d+ - (\S+) \(", out, re.M)]
    if rc == 124:
        failed.append("(timed out: " + ", ".join(names) + ")")
    passed = re.findall(r"Test +#\d+: (\S+) \.+ +Passed", out)
    skipped = re.findall(r"Test +#\d+: (\S+) \.+\*+Skipped", out)
    ran = len(re.findall(r"Test +#\d+: ", out))
    return rc, failed, passed, skipped, ran


def run_tests(build, tests, log, timeout, stop_at_first=True):
    """The tests without a lock first; the 'ns:' ones under the shared lock, and
    only when the others caught nothing (stop_at_first): the lock is contended."""
    plain = [t for t in tests if not t.startswith("ns:")]
    ns = [t[3:] for t in tests if t.startswith("ns:")]
    t0 = time.time()
    tot = [0, [], [], [], 0]
    for names, lock in ((plain, False), (ns, True)):
        if not names or (stop_at_first and tot[1]):
            continue
        rc, failed, passed, skipped, ran = ctest(build, names, lock, log, timeout, stop_at_first)
        tot[0] = tot[0] or rc
        tot[1] += failed
        tot[2] += passed
        tot[3] += skipped
        tot[4] += ran
    return (*tot, time.time() - t0)


def apply(work, m):
    path = os.path.join(work, m["file"])
    with open(path, encoding="utf-8") as f:
        text = f.read()
    n = text.count(m["pattern"])
    if n != 1:
        return f"pattern found {n} times in {m['file']} (must be exactly once)"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(m["pattern"], m["replacement"], 1))
    return None


def restore(work, m):
    git("checkout", "--", m["file"], cwd=work)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="mutations to run (default: all)")
    ap.add_argument("--list", action="store_true", help="print the table and exit")
    ap.add_argument("--workdir", default=os.environ.get("MESHRUN_MUTATE_DIR", "/tmp/meshrun-mutate"))
    ap.add_argument("--ref", default="HEAD", help="commit to mutate (default HEAD)")
    ap.add_argument("--baseline", action="store_true",
                    help="run every named test unmutated first (not the ns: ones)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per mutation's tests (default 600)")
    ap.add_argument("--report", help="also write the result table (markdown) here")
    ap.add_argument("--check", action="store_true",
                    help="only check that every pattern occurs once in this checkout")
    ap.add_argument("--clean", action="store_true", help="remove the scratch worktree and exit")
    a = ap.parse_args()

    repo = git("rev-parse", "--show-toplevel", cwd=HERE).strip()
    rows = parse_table(TABLE)
    if a.list:
        for m in rows:
            print(f"{m['name']:24} {m['file']:28} {', '.join(m['tests'])}")
        print(f"{len(rows)} mutations")
        return 0
    if a.check:
        bad = 0
        for m in rows:
            with open(os.path.join(repo, m["file"]), encoding="utf-8") as f:
                n = f.read().count(m["pattern"])
            if n != 1:
                print(f"{m['name']}: pattern found {n} times in {m['file']}")
                bad += 1
        print(f"{len(rows)} mutations, {bad} bad patterns")
        return 1 if bad else 0
    if a.clean:
        if os.path.exists(a.workdir):
            git("worktree", "remove", "--force", a.workdir, cwd=repo)
        return 0
    if a.names:
        unknown = set(a.names) - {m["name"] for m in rows}
        if unknown:
            print(f"unknown mutation(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        rows = [m for m in rows if m["name"] in a.names]

    log = os.path.join(a.workdir + ".log")
    open(log, "w").close()
    build, commit = prepare(repo, a.workdir, a.ref, log)
    print(f"log: {log}", flush=True)

    if a.baseline:
        # the namespace tests are left out: the shared lock can be held for many
        # minutes, and each runs (under the lock) with its own row anyway
        tests = sorted({t for m in rows for t in m["tests"] if not t.startswith("ns:")})
        rc, failed, passed, skipped, ran, secs = run_tests(build, tests, log, a.timeout * 3, False)
        print(f"baseline: {len(passed)} passed, {len(skipped)} skipped, {len(failed)} failed ({secs:.0f} s)")
        if rc or failed or skipped:
            print(f"baseline: failed {', '.join(failed) or '-'}, skipped {', '.join(skipped) or '-'}"
                  f" (rc {rc}; see {log}): fix that first", file=sys.stderr)
            return 1

    results = []
    for m in rows:
        print(f"{m['name']}: {m['file']}: ", end="", flush=True)
        t0 = time.time()
        err = apply(a.workdir, m)
        res = {"m": m, "status": "", "by": "", "secs": 0.0}
        try:
            if err:
                res.update(status="ERROR", by=err)
            else:
                rc, out = build_tree(build, log)
                if rc:
                    res.update(status="ERROR", by="does not build: " + (re.findall(r"error: .*", out) or ["?"])[0][:120])
                else:
                    rc, failed, passed, skipped, ran, secs = run_tests(build, m["tests"], log, a.timeout)
                    if failed or (rc and ran):
                        res.update(status="caught", by=", ".join(failed) or f"ctest rc {rc}")
                    elif ran == 0:
                        res.update(status="ERROR", by="no test matched " + ", ".join(m["tests"]))
                    else:
                        res.update(status="MISSED", by=f"{len(passed)} passed" + (f", {len(skipped)} skipped" if skipped else ""))
        finally:
            restore(a.workdir, m)
        res["secs"] = time.time() - t0
        print(f"{res['status']} ({res['by']}) {res['secs']:.0f} s", flush=True)
        results.append(res)
    # leave the build matching the tree again
    build_tree(build, log)

    lines = [f"Mutation run on {commit[:12]} ({time.strftime('%Y-%m-%d %H:%M')}):", "",
             "| # | mutation | file | result | caught by | s |", "|--|--|--|--|--|--|"]
    for i, r in enumerate(results, 1):
        lines.append(f"| {i} | {r['m']['name']} | {r['m']['file']} | {r['status']} | {r['by']} | {r['secs']:.0f} |")
    caught = sum(r["status"] == "caught" for r in results)
    lines += ["", f"{caught} of {len(results)} mutations caught"]
    text = "\n".join(lines)
    print("\n" + text)
    if a.report:
        with open(a.report, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0 if caught == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
