#!/usr/bin/python3
'''A small AT-SPI driver for the desktop tests, run by tests/desktop/atspi.mjs.

Reads one JSON request a line on stdin, {"id": N, "op": "...", ...}, and
answers each with one line on stdout: {"id": N, "ok": true, "result": ...}
or {"id": N, "ok": false, "error": "..."}. Each request finds its widget
afresh (no handles to go stale): a selector is the application's name
("app") or process id ("pid") or both, and optionally a role ("role", AT-SPI's role name: "push button",
"label", "spin button", "check box", "text", "frame", "drawing area") and
an accessible name ("name"), and "index" (the n-th match, 0 by default).
A request answers at once; waiting is the caller's (atspi.mjs retries
under a deadline).

Ops:
  apps                          [{name, pid}] of the applications on the registry
  find      selector            {role, name, states, text?, value?} of the match
  all       selector            the same for every match
  text      selector            a label's or entry's text (its name if it has none)
  click     selector [action]   runs the action ("click" unless given)
  actions   selector            the action names
  checked   selector            whether the CHECKED state is on
  check     selector on         clicks a check box until CHECKED is `on`
  value     selector            a spin button's value (Atspi.Value)
  setValue  selector value      sets it
  setText   selector text       an entry's text (Atspi.EditableText)
  extents   selector            {x, y, width, height} on the screen
  tree      app                 the application's tree as indented text
  screenshot path [selector]    the screen (or the selected widget's
                                extents) as a PNG, read from the X server
'''
import json
import sys

import gi

gi.require_version('Atspi', '2.0')
gi.require_version('Gdk', '3.0')
gi.require_version('GdkPixbuf', '2.0')
from gi.repository import Atspi  # noqa: E402

# An application that stopped answering fails a request in 5 s, not 25.
Atspi.set_timeout(5000, 15000)


class Failure(Exception):
    pass


def desktop_apps():
    desktop = Atspi.get_desktop(0)
    for i in range(desktop.get_child_count()):
        app = desktop.get_child_at_index(i)
        if app is not None:
            yield app


def find_app(req):
    name, pid = req.get('app'), req.get('pid')
    for app in desktop_apps():
        if name is not None and safe(app.get_name) != name:
            continue
        if pid is not None and safe(app.get_process_id) != pid:
            continue
        app.clear_cache()
        return app
    there = [f'{safe(a.get_name)} (pid {safe(a.get_process_id)})' for a in desktop_apps()]
    raise Failure(f'no application {app_what(req)} (there are: {", ".join(there) or "none"})')


def app_what(req):
    return ' '.join(f'{k} {req[k]!r}' for k in ('app', 'pid') if req.get(k) is not None)


def safe(f, default=None):
    try:
        return f()
    except Exception:  # pylint: disable=broad-except
        return default


def walk(node, depth=0):
    yield node, depth
    n = safe(node.get_child_count, 0)
    for i in range(n):
        child = safe(lambda i=i: node.get_child_at_index(i))
        if child is not None:
            yield from walk(child, depth + 1)


def matches(req):
    app = find_app(req)
    role, name = req.get('role'), req.get('name')
    out = []
    for node, _ in walk(app):
        if role is not None and safe(node.get_role_name) != role:
            continue
        if name is not None and safe(node.get_name) != name:
            continue
        out.append(node)
    return out


def find(req):
    found = matches(req)
    i = req.get('index', 0)
    if len(found) <= i:
        what = ' '.join(f'{k} {req[k]!r}' for k in ('role', 'name') if req.get(k) is not None)
        raise Failure(f'no {what} in {app_what(req)}' + (f' (found {len(found)})' if i else ''))
    return found[i]


def text_of(node):
    t = safe(node.get_text_iface)
    if t is not None:
        return t.get_text(0, t.get_character_count())
    return node.get_name()


def states(node):
    ss = node.get_state_set()
    return [Atspi.StateType(s).value_nick for s in ss.get_states()]


def describe(node):
    d = {'role': safe(node.get_role_name), 'name': safe(node.get_name), 'states': safe(lambda: states(node), [])}
    if safe(node.get_text_iface) is not None:
        d['text'] = safe(lambda: text_of(node))
    v = safe(node.get_value_iface)
    if v is not None:
        d['value'] = safe(v.get_current_value)
    return d


def do_action(node, action):
    a = node.get_action_iface()
    if a is None:
        raise Failure(f'{node.get_role_name()} {node.get_name()!r} has no actions')
    names = [a.get_action_name(i) for i in range(a.get_n_actions())]
    if action not in names:
        raise Failure(f'{node.get_role_name()} {node.get_name()!r} has no action {action!r} (has {names})')
    if not a.do_action(names.index(action)):
        raise Failure(f'{action!r} on {node.get_role_name()} {node.get_name()!r} refused')


def checked(node):
    return node.get_state_set().contains(Atspi.StateType.CHECKED)


def extents(node):
    c = node.get_component_iface()
    if c is None:
        raise Failure(f'{node.get_role_name()} {node.get_name()!r} has no extents')
    r = c.get_extents(Atspi.CoordType.SCREEN)
    return {'x': r.x, 'y': r.y, 'width': r.width, 'height': r.height}


def tree(req):
    lines = []
    for node, depth in walk(find_app(req)):
        d = describe(node)
        extra = ''.join(f' {k}={d[k]!r}' for k in ('text', 'value') if k in d)
        lines.append(f'{"  " * depth}{d["role"]} {d["name"]!r}{extra} [{",".join(d["states"])}]')
    return '\n'.join(lines)


def screenshot(req):
    from gi.repository import Gdk  # pylint: disable=import-outside-toplevel
    if not Gdk.init_check([])[0]:
        raise Failure('cannot open the X display for a screenshot')
    root = Gdk.get_default_root_window()
    if req.get('app') or req.get('pid'):
        e = extents(find(req))
    else:
        e = {'x': 0, 'y': 0, 'width': root.get_width(), 'height': root.get_height()}
    pixbuf = Gdk.pixbuf_get_from_window(root, e['x'], e['y'], e['width'], e['height'])
    if pixbuf is None:
        raise Failure(f'no pixels at {e}')
    pixbuf.savev(req['path'], 'png', [], [])
    return e


def check(req):
    node = find(req)
    want = bool(req['on'])
    if checked(node) != want:
        do_action(node, 'click')
    return want


def set_value(req):
    v = find(req).get_value_iface()
    if v is None:
        raise Failure(f'{req.get("role")} {req.get("name")!r} has no value')
    if not v.set_current_value(float(req['value'])):
        raise Failure(f'{req.get("role")} {req.get("name")!r} refused the value {req["value"]}')
    return v.get_current_value()


def set_text(req):
    node = find(req)
    e = node.get_editable_text_iface()
    if e is None:
        raise Failure(f'{req.get("role")} {req.get("name")!r} is not editable')
    if not e.set_text_contents(req['text']):
        raise Failure(f'{req.get("role")} {req.get("name")!r} refused the text')
    return text_of(node)


def value(req):
    v = find(req).get_value_iface()
    if v is None:
        raise Failure(f'{req.get("role")} {req.get("name")!r} has no value')
    return v.get_current_value()


OPS = {
    'apps': lambda req: [{'name': safe(a.get_name), 'pid': safe(a.get_process_id)} for a in desktop_apps()],
    'find': lambda req: describe(find(req)),
    'all': lambda req: [describe(n) for n in matches(req)],
    'text': lambda req: text_of(find(req)),
    'click': lambda req: do_action(find(req), req.get('action', 'click')),
    'actions': lambda req: (lambda a: [a.get_action_name(i) for i in range(a.get_n_actions())] if a else [])(
        find(req).get_action_iface()),
    'checked': lambda req: checked(find(req)),
    'check': check,
    'value': value,
    'setValue': set_value,
    'setText': set_text,
    'extents': lambda req: extents(find(req)),
    'tree': tree,
    'screenshot': screenshot,
}


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        req = {}
        try:
            req = json.loads(line)
            op = OPS.get(req.get('op'))
            if op is None:
                raise Failure(f'unknown op {req.get("op")!r}')
            out = {'id': req.get('id'), 'ok': True, 'result': op(req)}
        except Failure as e:
            out = {'id': req.get('id'), 'ok': False, 'error': str(e)}
        except Exception as e:  # pylint: disable=broad-except
            out = {'id': req.get('id'), 'ok': False, 'error': f'{type(e).__name__}: {e}'}
        sys.stdout.write(json.dumps(out) + '\n')
        sys.stdout.flush()


if __name__ == '__main__':
    main()
