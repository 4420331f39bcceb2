'''dbusmock template: GNOME's org.gnome.Mutter.IdleMonitor on the session bus.

GetIdletime answers the milliseconds since the last input: the value the
test last set with org.freedesktop.DBus.Mock.SetIdletime (t, ms), grown by
the time since then, as a real idle time grows while nobody types.
'''
import time

import dbus

from dbusmock import MOCK_IFACE

BUS_NAME = 'org.gnome.Mutter.IdleMonitor'
MAIN_OBJ = '/org/gnome/Mutter/IdleMonitor/Core'
MAIN_IFACE = 'org.gnome.Mutter.IdleMonitor'
SYSTEM_BUS = False


def load(mock, parameters):
    mock.idle_ms = int(parameters.get('idle_ms', 0))
    mock.idle_at = time.monotonic()


@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='t')
def GetIdletime(self):
    return dbus.UInt64(self.idle_ms + int((time.monotonic() - self.idle_at) * 1000))


@dbus.service.method(MOCK_IFACE, in_signature='t', out_signature='')
def SetIdletime(self, ms):
    self.idle_ms = int(ms)
    self.idle_at = time.monotonic()
