#!/usr/bin/python3
"""sense_check.py — node-desktop/sense.c against mocked services.

Starts a private system bus and session bus (python3-dbusmock), puts mocks
of UPower, logind (with session c1) and the GNOME idle monitor on them, runs
sense_probe (tests/desktop/sense_probe.c) and checks what it prints:

  - OnBattery changes are seen within a second, and a vanished UPower
    counts as AC;
  - the idle time comes from the GNOME idle monitor while it is there, from
    logind's IdleHint/IdleSinceHintMonotonic when it is not, and is unknown
    when neither is;
  - the sleep inhibitor is asked of logind once however often it is wished
    for, released when told, dropped when logind vanishes and asked again
    of the next logind; a logind that refuses is logged once.

Usage: /usr/bin/python3 tests/desktop/sense_check.py [PROBE]
(Debian's python, which has python3-dbusmock; PROBE defaults to
build/tests/desktop/sense_probe). Exits 0 when every check passed, 1 when
one failed, 77 (skipped) when dbusmock or dbus-daemon is missing.
"""

import os
import re
import selectors
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import dbus
    import dbusmock
    from dbusmock import DBusTestCase, MOCK_IFACE
except ImportError as e:
    print(f"SKIP sense_check: python3-dbusmock is not installed for {sys.executable} ({e})")
    sys.exit(77)

if shutil.which("dbus-daemon") is None:
    print("SKIP sense_check: no dbus-daemon")
    sys.exit(77)

PROBE = sys.argv[1] if len(sys.argv) > 1 else "build/tests/desktop/sense_probe"

MUTTER_NAME = "org.gnome.Mutter.IdleMonitor"
MUTTER_PATH = "/org/gnome/Mutter/IdleMonitor/Core"
LOGIND_NAME = "org.freedesktop.login1"
LOGIND_PATH = "/org/freedesktop/login1"
MANAGER = "org.freedesktop.login1.Manager"
SESSION = "org.freedesktop.login1.Session"
SESSION_PATH = "/org/freedesktop/login1/session/c1"
UPOWER = "org.freedesktop.UPower"


class Failed(Exception):
    pass


class Probe:
    """The probe process: lines out, commands in, every wait with a deadline."""

    def __init__(self, path, env):
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, env=env)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.buf = b""
        self.lines = []  # every line, for the failure message

    def send(self, cmd):
        self.proc.stdin.write(cmd.encode() + b"\n")
        self.proc.stdin.flush()

    def _line(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                return None
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        line = line.decode()
        self.lines.append(line)
        return line

    def expect(self, pattern, within, what):
        """The first line matching pattern within `within` seconds; lines
        before it are passed over. Returns (match, seconds waited)."""
        t0 = time.monotonic()
        deadline = t0 + within
        while True:
            line = self._line(deadline)
            if line is None:
                raise Failed(f"{what}: no line /{pattern}/ within {within} s; "
                             f"the probe printed {self.lines[-12:]}")
            m = re.fullmatch(pattern, line)
            if m:
                return m, time.monotonic() - t0

    def expect_all(self, patterns, within, what):
        """Every pattern matched by some line within `within` seconds, in any
        order."""
        deadline = time.monotonic() + within
        left = list(patterns)
        while left:
            line = self._line(deadline)
            if line is None:
                raise Failed(f"{what}: no line /{left[0]}/ within {within} s; "
                             f"the probe printed {self.lines[-12:]}")
            left = [pat for pat in left if not re.fullmatch(pat, line)]

    def stderr(self):
        self.err.seek(0)
        return self.err.read()

    def close(self):
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Failed("the probe did not exit within 10 s of the end of its input")


def wait_until(pred, within, what):
    deadline = time.monotonic() + within
    while not pred():
        if time.monotonic() > deadline:
            raise Failed(f"{what}: not within {within} s")
        time.sleep(0.02)  # polling a mock's state, with the deadline above


def mono_us():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


class Services(DBusTestCase):
    """The mocks, started and stopped by the steps below."""

    def __init__(self):
        super().__init__()
        self.procs = []

    def track(self, proc):
        self.procs.append(proc)
        return proc

    @staticmethod
    def stop(proc):
        proc.terminate()
        proc.wait(timeout=10)

    def staged(self, name, path, iface, system_bus, template=None, params=None, setup=None):
        """A mock that appears under `name` only once it is set up.
        dbusmock owns its name before it loads a template, so a client that
        answers the name at once would race the setup; this mock is built
        under a stand-in name and takes `name` last."""
        self.staged_count = getattr(self, "staged_count", 0) + 1
        stand_in = f"org.simfarm.test.Staged{self.staged_count}"
        proc = self.track(self.spawn_server(stand_in, path, iface, system_bus=system_bus,
                                            stdout=subprocess.DEVNULL))
        obj = self.get_dbus(system_bus).get_object(stand_in, path)
        if template is not None:
            obj.AddTemplate(template, dbus.Dictionary(params or {}, signature="sv"),
                            dbus_interface=MOCK_IFACE)
        if setup is not None:
            setup(obj)
        obj.AddMethod("org.simfarm.Test", "Claim", "s", "",
                      "self.claimed = dbus.service.BusName(args[0], self.bus_name.get_bus(), "
                      "do_not_queue=True)", dbus_interface=MOCK_IFACE)
        obj.Claim(name, dbus_interface="org.simfarm.Test")
        return proc, obj

    def upower(self, on_battery):
        return self.staged(UPOWER, "/org/freedesktop/UPower", UPOWER, True, "upower",
                           {"OnBattery": dbus.Boolean(on_battery)})

    def logind(self, uid):
        def add_session(obj):
            obj.AddSession("c1", "seat0", dbus.UInt32(uid), "user", True, dbus_interface=MOCK_IFACE)
        proc, obj = self.staged(LOGIND_NAME, LOGIND_PATH, MANAGER, True, "logind", {}, add_session)
        session = self.get_dbus(system_bus=True).get_object(LOGIND_NAME, SESSION_PATH)
        return proc, obj, session

    def refusing_logind(self):
        def refuse(obj):
            obj.AddMethod(MANAGER, "Inhibit", "ssss", "h",
                          'raise dbus.exceptions.DBusException("not you", '
                          'name="org.freedesktop.DBus.Error.AccessDenied")',
                          dbus_interface=MOCK_IFACE)
        return self.staged(LOGIND_NAME, LOGIND_PATH, MANAGER, True, setup=refuse)

    def mutter(self, idle_ms):
        return self.staged(MUTTER_NAME, MUTTER_PATH, MUTTER_NAME, False,
                           setup=lambda obj: self.set_idle(obj, idle_ms))

    @staticmethod
    def set_idle(mutter, idle_ms):
        mutter.AddMethod(MUTTER_NAME, "GetIdletime", "", "t", f"ret = {int(idle_ms)}",
                         dbus_interface=MOCK_IFACE)


def inhibitors(logind):
    return [tuple(str(x) for x in i[:4]) for i in logind.ListInhibitors(dbus_interface=MANAGER)]


OURS = ("sleep", "simfarm", "computing chunks for the farm", "block")


def run(svc, env):
    uid = os.getuid()
    upower_proc, upower = svc.upower(True)
    logind_proc, logind, session = svc.logind(uid)
    mutter_proc, mutter = svc.mutter(42000)

    p = Probe(PROBE, env)
    try:
        # -- idle time from the GNOME idle monitor --------------------------
        p.expect_all([r"battery 1", r"idle 42000 GNOME idle monitor"], 3,
                     "OnBattery and the idle time from the GNOME idle monitor at start")
        print("ok OnBattery and the idle time from the GNOME idle monitor read at start")

        # -- on battery, within a second -------------------------------------
        for on in (False, True, False):
            upower.Set(UPOWER, "OnBattery", dbus.Boolean(on), dbus_interface=dbus.PROPERTIES_IFACE)
            _, took = p.expect(rf"battery {int(on)}", 1.0, f"OnBattery {on} seen")
            print(f"ok OnBattery {on} seen in {took * 1000:.0f} ms")

        # -- the monitor is asked every second --------------------------------
        svc.set_idle(mutter, 70000)
        p.expect(r"idle 70000 GNOME idle monitor", 3, "a new idle time from the monitor")
        print("ok the idle monitor is polled")

        # -- no monitor: logind's idle hint ----------------------------------
        since = mono_us() - 65_000_000
        session.UpdateProperties(SESSION, {"IdleHint": dbus.Boolean(True),
                                           "IdleSinceHintMonotonic": dbus.UInt64(since)},
                                 dbus_interface=MOCK_IFACE)
        svc.stop(mutter_proc)
        m, _ = p.expect(r"idle (\d+) logind", 3, "idle time from logind once the monitor is gone")
        idle = int(m.group(1))
        if not 65000 <= idle < 70000:
            raise Failed(f"logind's idle time is {idle} ms, expected 65 s and a little")
        print(f"ok idle time from logind: {idle} ms")
        session.UpdateProperties(SESSION, {"IdleHint": dbus.Boolean(False)}, dbus_interface=MOCK_IFACE)
        p.expect(r"idle 0 logind", 1.5, "input seen by logind")
        print("ok logind's IdleHint false: idle 0")

        # -- the monitor comes back ----------------------------------------
        mutter_proc, mutter = svc.mutter(42000)
        p.expect(r"idle 42000 GNOME idle monitor", 3, "the monitor back")
        print("ok the idle monitor is followed when it comes back")

        # -- the inhibitor ---------------------------------------------------
        p.send("hold")
        p.expect(r"inhibit held", 3, "the inhibitor held")
        p.send("hold")  # again: no second lock
        upower.Set(UPOWER, "OnBattery", dbus.Boolean(True), dbus_interface=dbus.PROPERTIES_IFACE)
        p.expect(r"battery 1", 1.0, "a change after the second hold")
        calls = logind.GetMethodCalls("Inhibit", dbus_interface=MOCK_IFACE)
        if len(calls) != 1 or inhibitors(logind) != [OURS]:
            raise Failed(f"after two holds: {len(calls)} Inhibit calls, inhibitors {inhibitors(logind)}")
        print(f"ok Inhibit{OURS} called once")
        p.send("release")
        p.expect(r"inhibit released", 3, "the inhibitor released")
        wait_until(lambda: inhibitors(logind) == [], 3, "logind sees the lock's fd closed")
        print("ok the inhibitor released")

        # -- UPower comes and goes -------------------------------------------
        svc.stop(upower_proc)
        p.expect(r"battery 0", 2, "no UPower: on AC")
        upower_proc, upower = svc.upower(True)
        p.expect(r"battery 1", 3, "UPower back, on battery")
        print("ok UPower vanishing counts as AC, and is followed when it comes back")

        # -- logind goes: the lock goes with it, and the wish stays -----------
        p.send("hold")
        p.expect(r"inhibit held", 3, "held again")
        svc.stop(mutter_proc)
        svc.stop(logind_proc)
        p.expect_all([r"inhibit released", r"idle unknown"], 3,
                     "the lock gone with logind, and neither idle source")
        print("ok no idle source: idle unknown; the lock goes with logind")
        logind_proc, logind, session = svc.logind(uid)
        p.expect(r"inhibit held", 3, "the lock asked of the next logind")
        if inhibitors(logind) != [OURS]:
            raise Failed(f"the next logind's inhibitors: {inhibitors(logind)}")
        print("ok the inhibitor is asked again of the next logind")

        # -- a logind that refuses: logged once ------------------------------
        svc.stop(logind_proc)
        p.expect(r"inhibit released", 3, "the lock gone with logind")
        logind_proc, logind = svc.refusing_logind()
        def asked():
            return len(logind.GetMethodCalls("Inhibit", dbus_interface=MOCK_IFACE))
        wait_until(lambda: asked() >= 1, 3, "Inhibit asked of the refusing logind")

        def hold_again():
            # Each hold asks anew once the last refusal is in (a hold while
            # a call is in flight asks nothing), so this ends in a few.
            p.send("hold")
            return asked() >= 3
        wait_until(hold_again, 3, "Inhibit asked three times")
        if p.close() != 0:
            raise Failed("the probe did not exit 0")
        refusals = [ln for ln in p.stderr().splitlines() if "does not keep the computer awake" in ln]
        if len(refusals) != 1:
            raise Failed(f"refusals logged {len(refusals)} times, expected once: {refusals}")
        print("ok a refusal is logged once")
    finally:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()


def check_autostart():
    """The autostart entry written, its Exec line quoted, and removed."""
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, XDG_CONFIG_HOME=home)
        path = os.path.join(home, "autostart", "simfarm-desktop.desktop")

        def probe(*args):
            r = subprocess.run([PROBE, "autostart", *args], env=env, capture_output=True, text=True,
                               timeout=10)
            if r.returncode != 0:
                raise Failed(f"autostart {args}: exit {r.returncode}: {r.stderr.strip()}")

        def exec_line():
            with open(path, encoding="utf-8") as f:
                lines = [ln for ln in f.read().splitlines() if ln.startswith("Exec=")]
            return lines[0] if len(lines) == 1 else lines

        probe("on")
        if exec_line() != "Exec=simfarm-desktop --hidden":
            raise Failed(f"default autostart entry: {exec_line()}")
        probe("on", "/opt/sim farm/$bin/simfarm-desktop")
        # Desktop entry quoting, then the key file's own escape of \.
        want = 'Exec="/opt/sim farm/\\\\$bin/simfarm-desktop" --hidden'
        if exec_line() != want:
            raise Failed(f"quoted autostart entry: {exec_line()}, expected {want}")
        probe("off")
        if os.path.exists(path):
            raise Failed("the autostart entry is still there after off")
        probe("off")  # nothing to remove: still fine
    print("ok the autostart entry is written, quoted and removed")


def main():
    if not os.access(PROBE, os.X_OK):
        print(f"FAIL sense_check: no probe at {PROBE}")
        return 1
    DBusTestCase.start_system_bus()
    DBusTestCase.start_session_bus()
    svc = Services()
    env = dict(os.environ, XDG_SESSION_ID="c1")
    try:
        check_autostart()
        run(svc, env)
    except Failed as e:
        print(f"FAIL sense_check: {e}")
        return 1
    finally:
        for proc in svc.procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
        DBusTestCase.tearDownClass()
    print("sense_check: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
