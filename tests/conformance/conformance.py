#!/usr/bin/python3
"""embgw conformance checks: an independent peer, written from doc/ alone,
plays each side of the wire protocol (version 3) against real gateway
processes on a DPDK net_tap port in this network namespace.

usage: conformance.py BUILD_DIR [--list] [CHECK...]
One line per check: "PASS name: what was seen", "FAIL name: why" or
"XFAIL name: the finding" (XPASS: a finding fixed, its entry to go); the
last line "conformance: N passed, N failed, N expected failures". Runs
inside the network namespace run.sh makes."""
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CHECKS, XFAIL, Ctx, Fail  # noqa: E402
import checks_language  # noqa: E402,F401  (registers its checks)
import checks_refusals  # noqa: E402,F401
import checks_xfer  # noqa: E402,F401
import checks_drive  # noqa: E402,F401
import checks_quarantine  # noqa: E402,F401
import checks_cluster  # noqa: E402,F401

# ---- the runner -----------------------------------------------------------

def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    build, names = argv[1], argv[2:]
    if names == ["--list"]:
        for name, about, _ in CHECKS:
            print("%-28s %s" % (name, about))
        return 0
    todo = [c for c in CHECKS if not names or c[0] in names]
    unknown = set(names) - {c[0] for c in CHECKS}
    if unknown:
        print("unknown check(s): %s" % " ".join(sorted(unknown)))
        return 2
    ctx = Ctx(os.path.abspath(build))
    passed = failed = xfailed = 0
    try:
        for name, about, fn in todo:
            t0 = time.monotonic()
            try:
                msg = fn(ctx)
                ok = True
            except Fail as e:
                ok, msg = False, str(e)
            except Exception:  # a check that broke is a failure, with its trace
                ok, msg = False, traceback.format_exc().strip().replace("\n", " | ")
            dt = time.monotonic() - t0
            finding, sign = XFAIL.get(name, (None, None))
            if ok and finding:
                passed += 1
                print("XPASS %s (%.1fs): %s - the finding '%s' is fixed: remove its XFAIL entry "
                      "(tests/conformance/harness.py)" % (name, dt, msg, finding), flush=True)
            elif ok:
                passed += 1
                print("PASS %s (%.1fs): %s" % (name, dt, msg), flush=True)
            elif finding and sign in msg:
                xfailed += 1
                print("XFAIL %s (%.1fs): %s [finding: %s]" % (name, dt, msg, finding), flush=True)
            else:
                failed += 1
                print("FAIL %s (%.1fs): %s" % (name, dt, msg), flush=True)
                if ctx.env is not None:
                    # a failed check may leave the shared gateway in any state
                    ctx.env.close()
                    ctx.env = None
    finally:
        ctx.cleanup(keep=failed > 0)
    if failed:
        print("logs kept in %s" % ctx.tmp)
    print("conformance: %d passed, %d failed, %d expected failures" % (passed, failed, xfailed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
