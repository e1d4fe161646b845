//! JSON written as Python's `json.dumps` writes it by default: `", "` between items, `": "`
//! after keys, every character outside ASCII as a `\uXXXX` escape. Qwen's function-calling
//! prompt (qwen-agent's `NousFnCallPrompt`) and the GUI fine-tunes' training data render tool
//! schemas and calls this way, so the prompt shows them byte for byte as the models saw them.

use std::io;

use serde_json::ser::{CharEscape, Formatter, Serializer};
use serde_json::Value;

/// `value` as Python's `json.dumps(value)` writes it (see the module docs).
pub fn python_json(value: &Value) -> String {
    let mut out = Vec::new();
    let mut ser = Serializer::with_formatter(&mut out, PythonFormatter);
    // Writing a `Value` into a Vec cannot fail: no I/O error, no map with non-string keys.
    if serde::Serialize::serialize(value, &mut ser).is_err() {
        return String::new();
    }
    // The formatter writes ASCII only.
    String::from_utf8(out).unwrap_or_default()
}

struct PythonFormatter;

/// Python's `", "` between items (none before the first).
fn separator<W: ?Sized + io::Write>(w: &mut W, first: bool) -> io::Result<()> {
    if first {
        Ok(())
    } else {
        w.write_all(b", ")
    }
}

impl Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        separator(w, first)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        separator(w, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        // `ensure_ascii=True`: every non-ASCII character as `\uXXXX`, astral ones as a
        // surrogate pair, as Python writes them.
        for c in fragment.chars() {
            if c.is_ascii() {
                let mut buf = [0u8; 1];
                w.write_all(c.encode_utf8(&mut buf).as_bytes())?;
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(w, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        let s: &[u8] = match escape {
            CharEscape::Quote => b"\\\"",
            CharEscape::ReverseSolidus => b"\\\\",
            CharEscape::Solidus => b"\\/",
            CharEscape::Backspace => b"\\b",
            CharEscape::FormFeed => b"\\f",
            CharEscape::LineFeed => b"\\n",
            CharEscape::CarriageReturn => b"\\r",
            CharEscape::Tab => b"\\t",
            CharEscape::AsciiControl(byte) => return write!(w, "\\u{byte:04x}"),
        };
        w.write_all(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Python 3: `json.dumps({"a": [1, "x\n"], "b": {"c": "é🙂"}})` is
    /// `{"a": [1, "x\n"], "b": {"c": "\u00e9\ud83d\ude42"}}`.
    #[test]
    fn writes_what_pythons_json_dumps_writes() {
        let value = serde_json::json!({"a": [1, "x\n"], "b": {"c": "é🙂"}});
        assert_eq!(
            python_json(&value),
            r#"{"a": [1, "x\n"], "b": {"c": "\u00e9\ud83d\ude42"}}"#
        );
    }
}
