'''dbusmock template: a StatusNotifierWatcher (org.kde.StatusNotifierWatcher)
on the session bus, with a host registered, so that a tray icon made with
libayatana-appindicator registers its StatusNotifierItem here instead of
falling back to a GtkStatusIcon.

RegisteredStatusNotifierItems lists each item as "<bus name><object path>"
(the item gives either; the sender's unique name completes it).
'''
import dbus

BUS_NAME = 'org.kde.StatusNotifierWatcher'
MAIN_OBJ = '/StatusNotifierWatcher'
MAIN_IFACE = 'org.kde.StatusNotifierWatcher'
SYSTEM_BUS = False


def load(mock, _parameters):
    mock.AddProperties(MAIN_IFACE, dbus.Dictionary({
        'RegisteredStatusNotifierItems': dbus.Array([], signature='s'),
        'IsStatusNotifierHostRegistered': True,
        'ProtocolVersion': dbus.Int32(0),
    }, signature='sv'))


@dbus.service.method(MAIN_IFACE, in_signature='s', out_signature='', sender_keyword='sender')
def RegisterStatusNotifierItem(self, service, sender=None):
    item = sender + service if service.startswith('/') else service + '/StatusNotifierItem'
    items = [i for i in self.props[MAIN_IFACE]['RegisteredStatusNotifierItems'] if i != item]
    items.append(item)
    self.UpdateProperties(MAIN_IFACE, {'RegisteredStatusNotifierItems': dbus.Array(items, signature='s')})
    self.EmitSignal(MAIN_IFACE, 'StatusNotifierItemRegistered', 's', [item])


@dbus.service.method(MAIN_IFACE, in_signature='s', out_signature='')
def RegisterStatusNotifierHost(self, _service):
    pass
