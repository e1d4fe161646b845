#!/usr/bin/python3
"""An order form in Qt 5 (Debian's python3-pyqt5), for the Qt tasks of the desktop suite.

Usage: qt_order.py OUTPUT_FILE

A window titled "Sightline Qt order" with a form: "Customer" (a line edit), "Quantity" (a spin
box, 1 to 20), "Size" (a combo box: Small, Medium, Large), "Gift wrap" (a check box), a list of
colours (Red, Green, Blue) and a "Save" button. The labels are related to their fields
(QFormLayout), as in most Qt forms.

"Save" writes one line to OUTPUT_FILE:
    customer=<text> quantity=<n> size=<size> gift=<yes|no> colour=<selected colours or none>
and "ready" is written to OUTPUT_FILE.ready once the window is shown.

Qt exposes its widgets on the AT-SPI bus only when assistive technology is on: the session's
org.a11y.Status.IsEnabled, or QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1 (the desktop suite sets both).
"""

import sys

from PyQt5.QtCore import QTimer
from PyQt5.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QLineEdit,
    QListWidget,
    QPushButton,
    QSpinBox,
    QWidget,
)


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: qt_order.py OUTPUT_FILE", file=sys.stderr)
        return 2
    out_path = sys.argv[1]
    app = QApplication(sys.argv[:1])
    window = QWidget()
    window.setWindowTitle("Sightline Qt order")
    form = QFormLayout(window)
    customer = QLineEdit()
    form.addRow("Customer", customer)
    quantity = QSpinBox()
    quantity.setRange(1, 20)
    form.addRow("Quantity", quantity)
    size = QComboBox()
    size.addItems(["Small", "Medium", "Large"])
    form.addRow("Size", size)
    gift = QCheckBox("Gift wrap")
    form.addRow(gift)
    colours = QListWidget()
    colours.addItems(["Red", "Green", "Blue"])
    colours.setMaximumHeight(80)
    form.addRow("Colour", colours)
    place = QPushButton("Save")
    form.addRow(place)

    def on_place() -> None:
        picked = [item.text() for item in colours.selectedItems()]
        line = (
            f"customer={customer.text()} quantity={quantity.value()} "
            f"size={size.currentText()} gift={'yes' if gift.isChecked() else 'no'} "
            f"colour={','.join(picked) or 'none'}"
        )
        with open(out_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    place.clicked.connect(on_place)
    window.move(60, 60)
    window.resize(420, 320)
    window.show()

    def ready() -> None:
        with open(out_path + ".ready", "w", encoding="utf-8") as f:
            f.write("ready\n")

    QTimer.singleShot(300, ready)
    return app.exec_()


if __name__ == "__main__":
    sys.exit(main())
