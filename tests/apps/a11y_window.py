#!/usr/bin/python3
"""The accessibility test window: a GTK 3 window at a fixed place with a fixed layout.

Usage: a11y_window.py LOG_FILE

Controls (window content coordinates, the window placed at WINDOW_X, WINDOW_Y on the root
window; with no window manager there is no decoration, so content = screen minus the origin):

    button "Alpha"      at ( 20,  20) size 120x40
    button "Beta"       at (160,  20) size 120x40
    button "Delete"     at (300,  20) size 120x40
    text field "Name"   at ( 20,  80) size 400x36
    check box "Notify"  at ( 20, 136) size 200x30
    label "Status: ready" at (20, 186) size 400x24

Alpha removes itself once clicked (so a test can make an element id stale).

Each control appends one line to LOG_FILE when something happens to it:
    clicked Alpha | clicked Beta | clicked Delete | text <the entry's text> | toggled Notify on/off
and "ready" once the window is mapped. The tests read this file; the layout above is what
they check the reported bounds against (tests/a11y_elements.rs keeps the same numbers).

Run with Debian's /usr/bin/python3 (python3-gi, gir1.2-gtk-3.0), inside a session bus with the
AT-SPI bus running, and GTK_MODULES=gail:atk-bridge, NO_AT_BRIDGE unset.
"""

import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

WINDOW_X, WINDOW_Y = 100, 120
WINDOW_W, WINDOW_H = 440, 230


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: a11y_window.py LOG_FILE", file=sys.stderr)
        return 2
    log_path = sys.argv[1]

    def record(line: str) -> None:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    win = Gtk.Window(title="Sightline a11y test")
    win.set_decorated(False)
    win.set_default_size(WINDOW_W, WINDOW_H)
    win.set_resizable(False)
    win.move(WINDOW_X, WINDOW_Y)
    win.connect("destroy", Gtk.main_quit)

    fixed = Gtk.Fixed()
    win.add(fixed)

    def on_clicked(button: Gtk.Button, name: str) -> None:
        record(f"clicked {name}")
        # Alpha goes away when clicked: what was on screen at the capture is gone, and an id
        # naming it is stale.
        if name == "Alpha":
            button.destroy()

    for i, name in enumerate(["Alpha", "Beta", "Delete"]):
        b = Gtk.Button(label=name)
        b.set_size_request(120, 40)
        b.connect("clicked", on_clicked, name)
        fixed.put(b, 20 + 140 * i, 20)

    entry = Gtk.Entry()
    entry.set_size_request(400, 36)
    entry.get_accessible().set_name("Name")
    # One line per change would log every keystroke; log the text once typing pauses.
    pending = {"id": 0}

    def flush_text() -> bool:
        pending["id"] = 0
        record(f"text {entry.get_text()}")
        return False

    def on_changed(_e: Gtk.Entry) -> None:
        if pending["id"]:
            GLib.source_remove(pending["id"])
        pending["id"] = GLib.timeout_add(300, flush_text)

    entry.connect("changed", on_changed)
    fixed.put(entry, 20, 80)

    check = Gtk.CheckButton(label="Notify")
    check.set_size_request(200, 30)
    check.connect(
        "toggled", lambda c: record(f"toggled Notify {'on' if c.get_active() else 'off'}")
    )
    fixed.put(check, 20, 136)

    status = Gtk.Label(label="Status: ready")
    status.set_size_request(400, 24)
    status.set_xalign(0.0)
    fixed.put(status, 20, 186)

    def on_mapped(*_args) -> bool:
        record("ready")
        return False

    win.connect("map-event", lambda *_a: GLib.timeout_add(200, on_mapped) and False)
    win.show_all()
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
