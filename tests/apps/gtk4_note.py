#!/usr/bin/python3
"""A note form in GTK 4 (Debian's python3-gi with gir1.2-gtk-4.0), for the GTK 4 task of the
desktop suite.

Usage: gtk4_note.py OUTPUT_FILE

A window titled "Sightline GTK 4 note": a grid with the label "Title" beside an entry (no
accessible relation between them, as in many hand-made forms), the check button "Pinned" and
the button "Save". "Save" writes one line to OUTPUT_FILE:
    title=<text> pinned=<yes|no>
and "ready" is written to OUTPUT_FILE.ready once the window is shown.

GTK 4.8 reports accessible extents relative to its window and names nameless widgets after
their class (GtkEntry): what Sightline's element source allows for.
"""

import sys

import gi

gi.require_version("Gtk", "4.0")
from gi.repository import GLib, Gtk  # noqa: E402


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: gtk4_note.py OUTPUT_FILE", file=sys.stderr)
        return 2
    out_path = sys.argv[1]
    app = Gtk.Application(application_id="org.sightline.Gtk4Note")

    def activate(app: Gtk.Application) -> None:
        window = Gtk.ApplicationWindow(application=app, title="Sightline GTK 4 note")
        window.set_default_size(420, 200)
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=12)
        for margin in ("top", "bottom", "start", "end"):
            getattr(box, f"set_margin_{margin}")(16)
        grid = Gtk.Grid(column_spacing=12, row_spacing=8)
        grid.attach(Gtk.Label(label="Title"), 0, 0, 1, 1)
        title = Gtk.Entry(hexpand=True)
        grid.attach(title, 1, 0, 1, 1)
        box.append(grid)
        pinned = Gtk.CheckButton(label="Pinned")
        box.append(pinned)
        save = Gtk.Button(label="Save")

        def on_save(_button: Gtk.Button) -> None:
            line = f"title={title.get_text()} pinned={'yes' if pinned.get_active() else 'no'}"
            with open(out_path, "a", encoding="utf-8") as f:
                f.write(line + "\n")

        save.connect("clicked", on_save)
        box.append(save)
        window.set_child(box)
        window.present()

        def ready() -> bool:
            with open(out_path + ".ready", "w", encoding="utf-8") as f:
                f.write("ready\n")
            return False

        GLib.timeout_add(300, ready)

    app.connect("activate", activate)
    return app.run([sys.argv[0]])


if __name__ == "__main__":
    sys.exit(main())
