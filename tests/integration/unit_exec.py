#!/usr/bin/python3
"""Run a systemd unit's ExecStart as the service manager would, without one.

    unit_exec.py UNIT INSTANCE [--map FROM=TO]... [--expect-socket PATH]
                 [--watchdog-usec N] [--until-file PATH] [--ready-file PATH]
                 [--log PATH] [--deadline-s S]

What the unit's [Service] section says is done here: %i and %% expanded,
EnvironmentFile= read (a leading '-': optional), $VAR (split into words)
and ${VAR} (one word) substituted in ExecStart, RuntimeDirectory= created,
CapabilityBoundingSet= and NoNewPrivileges= applied through setpriv(1),
LimitMEMLOCK= set, WatchdogSec= passed as WATCHDOG_USEC (--watchdog-usec
overrides it, so that a test need not wait half of the unit's interval),
and NOTIFY_SOCKET set to a datagram socket this script listens on.
--map FROM=TO rewrites every path that starts with FROM (the unit's
/usr/bin/embgw to a build's, /etc/embgw/ to a test's directory).

Checks, each a line on stdout and together the exit status (0: all held):
READY=1 arrives, and the attach socket (--expect-socket) exists when it
does; with a watchdog, WATCHDOG=1 arrives while the gateway runs; the
gateway is then stopped with the unit's KillSignal= once --until-file
exists (at once without it), STOPPING=1 arrives after that signal, and the
process exits 0 within TimeoutStopSec=. Every wait has a deadline.
"""
import argparse
import os
import resource
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time

CAPS = {"CAP_IPC_LOCK", "CAP_NET_RAW", "CAP_NET_ADMIN", "CAP_CHOWN",
        "CAP_SYS_ADMIN", "CAP_SYS_RAWIO", "CAP_DAC_OVERRIDE", "CAP_SYS_NICE",
        "CAP_SYS_RESOURCE", "CAP_FOWNER", "CAP_SETUID", "CAP_SETGID",
        "CAP_NET_BIND_SERVICE", "CAP_KILL"}


def has_sys_resource():
    """CAP_SYS_RESOURCE (bit 24) in this process's effective set."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> 24 & 1)
    return False


def parse_unit(path, instance):
    """[Service] as a dict of lists of values, specifiers expanded."""
    svc, section = {}, None
    with open(path) as f:
        for raw in f:
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            if section != "Service" or "=" not in line:
                continue
            key, val = line.split("=", 1)
            val = val.strip().replace("%%", "\0").replace("%i", instance)
            if "%" in val:
                sys.exit("unit_exec: %s: specifier in %s= not handled: %s"
                         % (path, key, val))
            svc.setdefault(key.strip(), []).append(val.replace("\0", "%"))
    return svc


def remap(word, maps):
    for src, dst in maps:
        if word.startswith(src):
            return dst + word[len(src):]
        # --name=/path and the like
        if "=" + src in word:
            return word.replace("=" + src, "=" + dst, 1)
    return word


def read_env_files(values, maps, env):
    for v in values:
        optional = v.startswith("-")
        path = remap(v.lstrip("-"), maps)
        if not os.path.exists(path):
            if optional:
                continue
            sys.exit("unit_exec: EnvironmentFile %s missing" % path)
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line or line[0] in "#;" or "=" not in line:
                    continue
                k, v2 = line.split("=", 1)
                words = shlex.split(v2, comments=False)
                env[k.strip()] = " ".join(words)


def expand_exec(line, env, maps):
    """systemd's ExecStart= word rules: $VAR alone splits on whitespace,
    ${VAR} is one word; prefixes (-, @, +, !) are not used by the unit."""
    if line[:1] in "-@+!:":
        sys.exit("unit_exec: ExecStart prefix %r not handled" % line[0])
    out = []
    for w in shlex.split(line):
        if w.startswith("$") and not w.startswith("${"):
            out += env.get(w[1:], "").split()
            continue
        while "${" in w:
            a = w.index("${")
            b = w.index("}", a)
            w = w[:a] + env.get(w[a + 2:b], "") + w[b + 1:]
        out.append(remap(w, maps))
    return out


def seconds(v):
    v = v.strip()
    if v.endswith("ms"):
        return float(v[:-2]) / 1000
    if v.endswith("min"):
        return float(v[:-3]) * 60
    return float(v.rstrip("s"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("unit")
    ap.add_argument("instance")
    ap.add_argument("--map", action="append", default=[])
    ap.add_argument("--expect-socket")
    ap.add_argument("--watchdog-usec", type=int)
    ap.add_argument("--until-file")
    ap.add_argument("--ready-file")
    ap.add_argument("--log", default="/dev/null")
    ap.add_argument("--deadline-s", type=float, default=60)
    a = ap.parse_args()
    maps = [tuple(m.split("=", 1)) for m in a.map]
    svc = parse_unit(a.unit, a.instance)
    one = {k: v[-1] for k, v in svc.items()}
    ok = True

    def check(cond, what):
        nonlocal ok
        print("unit: %s %s" % ("ok  " if cond else "FAIL", what), flush=True)
        ok = ok and cond
        return cond

    if one.get("Type") != "notify":
        sys.exit("unit_exec: Type=%s, not notify" % one.get("Type"))
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "LANG", "TERM")}
    env.setdefault("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    read_env_files(svc.get("EnvironmentFile", []), maps, env)
    argv = expand_exec(one["ExecStart"], env, maps)

    for d in svc.get("RuntimeDirectory", []):
        for name in d.split():
            path = remap("/run/" + name, maps)
            if not os.path.isdir(path):
                os.makedirs(path, mode=int(one.get("RuntimeDirectoryMode",
                                                   "0755"), 8))
    wrap = ["setpriv"]
    if "CapabilityBoundingSet" in one:
        caps = one["CapabilityBoundingSet"].split()
        unknown = [c for c in caps if c not in CAPS]
        if unknown:
            sys.exit("unit_exec: capabilities not known here: %s" % unknown)
        wrap.append("--bounding-set=-all," +
                    ",".join("+" + c[4:].lower() for c in caps))
    if one.get("NoNewPrivileges") == "yes":
        wrap.append("--no-new-privs")
    memlock = None
    if one.get("LimitMEMLOCK") == "infinity":
        memlock = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
        if resource.getrlimit(resource.RLIMIT_MEMLOCK)[1] != \
                resource.RLIM_INFINITY and \
                not has_sys_resource():
            # a container without CAP_SYS_RESOURCE; systemd itself can
            print("unit: note LimitMEMLOCK=infinity not applied: this "
                  "process may not raise the hard limit", flush=True)
            memlock = None

    def limits():
        if memlock is not None:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, memlock)

    wd = a.watchdog_usec
    if wd is None and "WatchdogSec" in one:
        wd = int(seconds(one["WatchdogSec"]) * 1e6)
    kill_sig = getattr(signal, one.get("KillSignal", "SIGTERM"))
    stop_s = seconds(one.get("TimeoutStopSec", "90s"))

    tmp = tempfile.mkdtemp(prefix="embgw-notify.")
    sock_path = os.path.join(tmp, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    env["NOTIFY_SOCKET"] = sock_path
    if wd:
        env["WATCHDOG_USEC"] = str(wd)
    print("unit: exec %s" % " ".join(wrap + ["--"] + argv), flush=True)
    log = open(a.log, "ab")
    t0 = time.monotonic()
    proc = subprocess.Popen(wrap + ["--"] + argv, env=env, stdout=log,
                            stderr=subprocess.STDOUT, preexec_fn=limits)

    def receive(until, want):
        """Messages until one has line `want`, the deadline or the exit."""
        while time.monotonic() < until:
            sock.settimeout(0.2)
            try:
                msg = sock.recv(4096).decode()
            except socket.timeout:
                if proc.poll() is not None:
                    return None
                continue
            lines = msg.split("\n")
            for ln in lines:
                if ln.startswith("STATUS="):
                    print("unit: %s" % ln, flush=True)
            if want in lines:
                return lines
        return None

    try:
        got = receive(t0 + a.deadline_s, "READY=1")
        check(got is not None, "READY=1 after %.1f s (exit status so far: "
              "%s)" % (time.monotonic() - t0, proc.poll()))
        if got is None:
            return 1
        if a.expect_socket:
            check(os.path.exists(a.expect_socket),
                  "the attach socket %s exists at READY=1" % a.expect_socket)
        if a.ready_file:
            open(a.ready_file, "w").close()
        if wd:
            got = receive(time.monotonic() + 3 * wd / 1e6 + 5, "WATCHDOG=1")
            check(got is not None, "WATCHDOG=1 while running (every %d ms "
                  "expected)" % (wd // 2000))
        if a.until_file:
            until = time.monotonic() + a.deadline_s
            while not os.path.exists(a.until_file) and \
                    time.monotonic() < until and proc.poll() is None:
                time.sleep(0.1)
            check(os.path.exists(a.until_file),
                  "%s appeared within %d s" % (a.until_file, a.deadline_s))
        check(proc.poll() is None, "still running before the stop signal")
        if proc.poll() is None:
            proc.send_signal(kill_sig)
            got = receive(time.monotonic() + stop_s, "STOPPING=1")
            check(got is not None, "STOPPING=1 after %s"
                  % signal.Signals(kill_sig).name)
        try:
            rc = proc.wait(timeout=stop_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
            check(False, "exited within TimeoutStopSec=%d s" % stop_s)
        check(rc == 0, "exit status %d" % rc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()
        os.unlink(sock_path)
        os.rmdir(tmp)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
