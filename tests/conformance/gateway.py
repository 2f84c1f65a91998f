"""A gateway under test: configuration (scripts/gen-configs.sh, the port's
device turned into a DPDK net_tap), the process, its tap interface in this
network namespace, its telemetry and its exit report."""
import json
import os
import re
import signal
import socket
import subprocess
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TAP = "egwconf0"
GW_ADDR = {"encode": "192.168.77.1", "language": "192.168.77.2"}
PEER_ADDR = {"encode": "192.168.77.2", "language": "192.168.77.1"}
STRANGER = "192.168.77.3"
PORT = 9471
# a peer is dead after 5 s of silence, and a room waits 30 s for its ranks
# and for progress: a Python peer on a loaded machine can go without CPU
# for longer than the defaults (1 s, 5 s)
SLACK = "peer_dead_ms = 5000; bootstrap_ms = 30000; round_ms = 30000;"


def gen_configs(tmp, default=1024, lang_cap=131072, timers=SLACK,
                hidden=32, dtype="bf16", enc_cap=262144):
    # --memif: its link device is replaced by our tap below
    subprocess.run([os.path.join(ROOT, "scripts/gen-configs.sh"), "--memif",
                    "--hidden", str(hidden), "--dtype", dtype,
                    "--enc-capacity", str(enc_cap), tmp, str(default),
                    str(lang_cap), timers], check=True,
                   stdout=subprocess.DEVNULL)
    for cfg in ("encode.cfg", "language.cfg"):
        path = os.path.join(tmp, cfg)
        with open(path) as f:
            text = f.read()
        text, n = re.subn(r'device = "net_memif0[^"]*";',
                          'device = "net_tap0,iface=%s";' % TAP, text)
        assert n == 1, "%s: no memif device to replace" % path
        with open(path, "w") as f:
            f.write(text)
    with open(os.path.join(tmp, "psk.key"), "rb") as f:
        return f.read()


def edit_config(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text, "%s: no %r" % (path, old)
    with open(path, "w") as f:
        f.write(text.replace(old, new, 1))


def ip(*args):
    r = subprocess.run(["ip"] + list(args), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode:
        raise RuntimeError("ip %s: %s" % (" ".join(args), r.stderr.strip()))


class Gateway:
    """One embgw process of ours (its PID), started in this namespace."""
    count = 0

    def __init__(self, build, tmp, side, args=(), secs=400, name=None):
        Gateway.count += 1
        self.side = side
        self.name = name or "%s%d" % (side, Gateway.count)
        self.prefix = "egwconf-%s-%d" % (self.name, os.getpid())
        self.log_path = os.path.join(tmp, self.name + ".log")
        cfg = os.path.join(tmp, "encode.cfg" if side == "encode" else "language.cfg")
        lcore = "1" if side == "encode" else "0"
        # the load options (--produce, --drive ...) are embgw-gen's
        exe = os.path.join(build, "app/embgw-gen/embgw-gen" if args
                           else "app/embgw/embgw")
        cmd = ["timeout", "-s", "INT", "-k", "10", str(secs), exe, "-l", lcore,
               "--no-huge", "-m", "400", "--no-pci", "--file-prefix",
               self.prefix, "--", "-f", cfg] + list(args)
        # the tap of a gateway that just ended may still be going away
        end = time.monotonic() + 10
        while os.path.exists("/sys/class/net/%s" % TAP):
            if time.monotonic() > end:
                raise RuntimeError("the tap %s of an earlier gateway is still there" % TAP)
            time.sleep(0.05)
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.report_lines = None

    def wait_tap(self, peer_addr, extra=(), timeout=60):
        """The tap interface is up with our (the peer's) address."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited (%d) before its tap came up: %s"
                                   % (self.name, self.proc.returncode, self.tail()))
            if os.path.exists("/sys/class/net/%s" % TAP):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("%s: no tap interface after %d s" % (self.name, timeout))
        subprocess.run(["sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % TAP],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ip("addr", "replace", peer_addr + "/24", "dev", TAP)
        for a in extra:
            ip("addr", "replace", a + "/24", "dev", TAP)
        ip("link", "set", TAP, "up")
        # the gateway's telemetry answers once its ports are set up
        while time.monotonic() < end:
            if self.telemetry("/embgw/stats", tries=1):
                return
            time.sleep(0.2)
        raise RuntimeError("%s: no telemetry within %d s" % (self.name, timeout))

    def telemetry(self, command, tries=3):
        """The answer to an rte_telemetry command, None when there is none
        (after `tries` attempts of up to 5 s each)."""
        path = "/var/run/dpdk/%s/dpdk_telemetry.v2" % self.prefix
        for _ in range(tries):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.settimeout(5)
            try:
                s.connect(path)
                s.recv(1 << 16)
                s.send(command.encode())
                reply = s.recv(1 << 20)
                return json.loads(reply.decode()).get(command)
            except (OSError, ValueError):
                time.sleep(0.1)
            finally:
                s.close()
        return None

    def stat(self, key, command="/embgw/stats", port="p0"):
        t = self.telemetry(command)
        try:
            return t[port][key]
        except (KeyError, TypeError):
            return None

    def stop(self, timeout=30):
        """SIGINT (the gateway reports and exits), then the report."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.wait(timeout)

    def wait(self, timeout=60):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        if not self.log.closed:
            self.log.close()
        return self.report()

    def kill(self):
        """End it whatever its state: SIGINT (the timeout wrapper passes it
        on to embgw, which tears down), SIGKILL only if that is not enough
        (then embgw itself is ended by its wrapper's --kill-after)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()

    def report(self):
        """{section: {key: value}} of port p0's report lines."""
        rep = {}
        with open(self.log_path, errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 2 or not parts[0].endswith(":"):
                    continue
                if not re.match(r"^[a-z-]+:$", parts[0]):
                    continue
                kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
                if kv.get("port", "p0") != "p0":
                    continue
                sec = parts[0][:-1]
                if sec == "failed":
                    rep.setdefault("failed", {})[kv.get("reason")] = int(kv.get("count", 0))
                else:
                    rep[sec] = {k: _num(v) for k, v in kv.items()}
        return rep

    def grep(self, pattern):
        with open(self.log_path, errors="replace") as f:
            return [line for line in f if re.search(pattern, line)]

    def tail(self, n=15):
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-n:])


def _num(v):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v
