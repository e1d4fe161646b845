#!/usr/bin/python3
"""Windows for the agent-loop tasks: what a runner must wait for, focus, tell apart, split or
leave alone. GTK 3 (Debian's python3-gi), fixed layouts at fixed places.

Usage: loop_window.py MODE LOG_FILE [ARG]

Modes (each logs "ready" once mapped, then one line per event to LOG_FILE):

  delayed    "Report" window with an "Open report" button. A click opens a second window,
             "Report viewer", only 1.5 s later (as a slow program would), which has a "Close
             viewer" button. Logs: "opened viewer" (each time one opens), "closed viewer".
  focus      "Shipping" form with two entries, "Street" (focused at start) and "City", and a
             default "Ship" button that Enter or activating an entry would press. Logs the
             entries' texts on every change ("street …", "city …") and "shipped" when the
             form is submitted.
  twins      "Plans" window with two columns, "Basic" on the left and "Pro" on the right,
             each with a button labelled "Choose". Logs "chose basic" / "chose pro".
  paragraph  "Notes" window with a multi-line text view "Note" and a "Keep" button; a click on
             Keep writes the text view's whole text to ARG (a file) and logs "kept N chars".
  dialog     "Discard changes?" dialog: a message, an entry "Reason", and buttons
             "Keep editing" and "Discard" (the default, which Enter or activating the entry
             presses). Logs "reason …" on every change, "kept" or "discarded".

With no window manager there is no decoration: window content = screen minus its origin.
Run inside a session bus with the AT-SPI bus running and GTK_MODULES=gail:atk-bridge.
"""

import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk  # noqa: E402

X, Y = 100, 120


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: loop_window.py MODE LOG_FILE [ARG]", file=sys.stderr)
        return 2
    mode, log_path = sys.argv[1], sys.argv[2]
    arg = sys.argv[3] if len(sys.argv) > 3 else None

    def record(line: str) -> None:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def window(title: str, width: int, height: int, x: int = X, y: int = Y) -> Gtk.Window:
        win = Gtk.Window(title=title)
        win.set_decorated(False)
        win.set_default_size(width, height)
        win.set_resizable(False)
        win.move(x, y)
        return win

    def button(label: str, on_click) -> Gtk.Button:
        b = Gtk.Button(label=label)
        b.set_size_request(140, 40)
        b.connect("clicked", lambda _b: on_click())
        return b

    def entry(name: str, log_as: str) -> Gtk.Entry:
        e = Gtk.Entry()
        e.set_size_request(300, 36)
        e.get_accessible().set_name(name)
        e.connect("changed", lambda w: record(f"{log_as} {w.get_text()}"))
        return e

    if mode == "delayed":
        win = window("Report", 400, 120)
        fixed = Gtk.Fixed()
        win.add(fixed)

        def open_viewer() -> bool:
            viewer = window("Report viewer", 360, 140, X + 60, Y + 200)
            box = Gtk.Fixed()
            viewer.add(box)
            label = Gtk.Label(label="Quarterly report: all figures in order.")
            box.put(label, 20, 20)

            def close() -> None:
                record("closed viewer")
                viewer.destroy()

            box.put(button("Close viewer", close), 20, 70)
            viewer.show_all()
            record("opened viewer")
            return False

        fixed.put(button("Open report", lambda: GLib.timeout_add(1500, open_viewer)), 20, 40)
    elif mode == "focus":
        win = window("Shipping", 420, 200)
        grid = Gtk.Grid(row_spacing=12, column_spacing=12, margin=20)
        win.add(grid)
        street = entry("Street", "street")
        city = entry("City", "city")
        for row, (label, field) in enumerate([("Street", street), ("City", city)]):
            grid.attach(Gtk.Label(label=label, xalign=0.0), 0, row, 1, 1)
            grid.attach(field, 1, row, 1, 1)
            field.set_activates_default(True)
        ship = button("Ship", lambda: record("shipped"))
        ship.set_can_default(True)
        grid.attach(ship, 1, 2, 1, 1)
        win.set_default(ship)
        win.connect("map-event", lambda *_a: street.grab_focus() and False)
    elif mode == "twins":
        win = window("Plans", 480, 160)
        fixed = Gtk.Fixed()
        win.add(fixed)
        for i, plan in enumerate(["Basic", "Pro"]):
            fixed.put(Gtk.Label(label=f"{plan} plan"), 40 + 240 * i, 20)
            fixed.put(button("Choose", lambda p=plan: record(f"chose {p.lower()}")), 40 + 240 * i, 70)
    elif mode == "paragraph":
        win = window("Notes", 640, 360)
        fixed = Gtk.Fixed()
        win.add(fixed)
        view = Gtk.TextView()
        view.set_wrap_mode(Gtk.WrapMode.WORD)
        view.get_accessible().set_name("Note")
        scroll = Gtk.ScrolledWindow()
        scroll.set_size_request(600, 260)
        scroll.add(view)
        fixed.put(scroll, 20, 20)

        def keep() -> None:
            buf = view.get_buffer()
            text = buf.get_text(buf.get_start_iter(), buf.get_end_iter(), True)
            if arg:
                with open(arg, "w", encoding="utf-8") as f:
                    f.write(text)
            record(f"kept {len(text)} chars")

        fixed.put(button("Keep", keep), 20, 300)
    elif mode == "dialog":
        win = window("Discard changes?", 460, 200)
        grid = Gtk.Grid(row_spacing=12, column_spacing=12, margin=20)
        win.add(grid)
        grid.attach(Gtk.Label(label="You have unsaved changes.", xalign=0.0), 0, 0, 2, 1)
        grid.attach(Gtk.Label(label="Reason", xalign=0.0), 0, 1, 1, 1)
        reason = entry("Reason", "reason")
        reason.set_activates_default(True)
        grid.attach(reason, 1, 1, 1, 1)
        grid.attach(button("Keep editing", lambda: record("kept")), 0, 2, 1, 1)
        discard = button("Discard", lambda: record("discarded"))
        discard.set_can_default(True)
        grid.attach(discard, 1, 2, 1, 1)
        win.set_default(discard)
    else:
        print(f"unknown mode {mode!r}", file=sys.stderr)
        return 2

    win.connect("destroy", Gtk.main_quit)

    def on_mapped(*_args) -> bool:
        record("ready")
        return False

    win.connect("map-event", lambda *_a: GLib.timeout_add(200, on_mapped) and False)
    win.show_all()
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
