//! Keyboard and mouse input through enigo, and the key names a plan may use.
//!
//! # Accepted key names
//!
//! [`parse_key`] accepts these names, case-insensitively, with `_`, `-` and spaces ignored
//! (`page_up`, `Page-Up` and `PageUp` are one name). They are listed in [`KEY_NAMES`] (the
//! names the decoding grammar offers) and [`KEY_ALIASES`] (the other spellings).
//!
//! | key | names |
//! |---|---|
//! | Return | `Return`, `Enter` |
//! | Tab | `Tab` |
//! | Escape | `Escape`, `Esc` |
//! | Backspace | `Backspace` |
//! | Delete | `Delete`, `Del` |
//! | Insert (not on macOS) | `Insert`, `Ins` |
//! | arrows | `Up`/`ArrowUp`/`UpArrow`, `Down`/…, `Left`/…, `Right`/… |
//! | Home, End | `Home`, `End` |
//! | Page Up/Down | `PageUp`/`PgUp`/`Prior`, `PageDown`/`PgDn`/`Next` |
//! | F1–F20 | `F1` … `F20` |
//! | space | `Space` (or a single `" "`) |
//! | Caps Lock | `CapsLock` |
//! | modifiers | `Ctrl`/`Control`, `Alt`/`Option`, `Shift`, `Super`/`Meta`/`Cmd`/`Command`/`Win`/`Windows` |
//! | `+`, `-` | `Plus`, `Minus` (for chords such as `ctrl+plus`) |
//! | any single character | itself: `a`, `7`, `/`, `é` |
//!
//! A key given as a chord (`ctrl+s`, `ctrl+shift+t`) is split on `+` by [`parse_key_chord`];
//! letters in a chord with modifiers are lower-cased, so `ctrl+S` is Ctrl+S, not Ctrl+Shift+S.

use enigo::{Axis, Button, Coordinate, Enigo, Keyboard, Mouse, Settings};
/// enigo's key and direction types, which [`InputDevice`] speaks.
pub use enigo::{Direction, Key};

use super::coords::InputPoint;
use crate::error::{Error, Result};

/// The key names [`parse_key`] accepts besides single characters: [`KEY_NAMES`] (the names
/// the decoding grammar offers) and [`KEY_ALIASES`]; one list, in [`crate::moves::keys`].
pub use crate::moves::{KEY_ALIASES, KEY_NAMES};

/// Parses one key name (see the module docs for the accepted names).
pub fn parse_key(name: &str) -> Result<Key> {
    let mut chars = name.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return Ok(if c == ' ' {
            Key::Space
        } else {
            Key::Unicode(c)
        });
    }
    let norm: String = name
        .trim()
        .chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect();
    let key = match norm.as_str() {
        "return" | "enter" => Key::Return,
        "tab" => Key::Tab,
        "escape" | "esc" => Key::Escape,
        "backspace" => Key::Backspace,
        "delete" | "del" => Key::Delete,
        #[cfg(not(target_os = "macos"))]
        "insert" | "ins" => Key::Insert,
        "up" | "arrowup" | "uparrow" => Key::UpArrow,
        "down" | "arrowdown" | "downarrow" => Key::DownArrow,
        "left" | "arrowleft" | "leftarrow" => Key::LeftArrow,
        "right" | "arrowright" | "rightarrow" => Key::RightArrow,
        "home" => Key::Home,
        "end" => Key::End,
        "pageup" | "pgup" | "prior" => Key::PageUp,
        "pagedown" | "pgdn" | "pgdown" | "next" => Key::PageDown,
        "space" | "spacebar" => Key::Space,
        "capslock" => Key::CapsLock,
        "ctrl" | "control" => Key::Control,
        "alt" | "option" => Key::Alt,
        "shift" => Key::Shift,
        "super" | "meta" | "cmd" | "command" | "win" | "windows" => Key::Meta,
        "plus" => Key::Unicode('+'),
        "minus" => Key::Unicode('-'),
        f if f.starts_with('f') && f.len() > 1 => {
            function_key(&f[1..]).ok_or_else(|| unknown(name))?
        }
        _ => return Err(unknown(name)),
    };
    Ok(key)
}

fn unknown(name: &str) -> Error {
    Error::invalid_input(format!(
        "unknown key name {name:?}; accepted: a single character or one of {}",
        KEY_NAMES
            .iter()
            .chain(KEY_ALIASES)
            .filter(|k| k.chars().count() > 1)
            .copied()
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

fn function_key(num: &str) -> Option<Key> {
    const F_KEYS: [Key; 20] = [
        Key::F1,
        Key::F2,
        Key::F3,
        Key::F4,
        Key::F5,
        Key::F6,
        Key::F7,
        Key::F8,
        Key::F9,
        Key::F10,
        Key::F11,
        Key::F12,
        Key::F13,
        Key::F14,
        Key::F15,
        Key::F16,
        Key::F17,
        Key::F18,
        Key::F19,
        Key::F20,
    ];
    let n: usize = num.parse().ok()?;
    F_KEYS.get(n.checked_sub(1)?).copied()
}

/// Whether a key is a modifier (held while the rest of a chord is pressed).
pub fn is_modifier(key: Key) -> bool {
    matches!(key, Key::Control | Key::Alt | Key::Shift | Key::Meta)
}

/// Parses a key or a `+`-separated chord (`ctrl+shift+t`, `ctrl++`) into the keys to press in
/// order. A lone `+` is the plus key.
pub fn parse_key_chord(spec: &str) -> Result<Vec<Key>> {
    let spec = spec.trim();
    if spec.chars().count() == 1 {
        return Ok(vec![parse_key(spec)?]);
    }
    let mut parts: Vec<&str> = spec.split('+').collect();
    // "ctrl++" splits into ["ctrl", "", ""]: the two trailing empties are the '+' key itself.
    if parts.len() >= 3 && parts[parts.len() - 1].is_empty() && parts[parts.len() - 2].is_empty() {
        parts.truncate(parts.len() - 2);
        parts.push("+");
    }
    if parts.iter().any(|p| p.trim().is_empty()) {
        return Err(Error::invalid_input(format!(
            "key chord {spec:?} has an empty part"
        )));
    }
    let names: Vec<String> = parts.iter().map(|p| p.trim().to_string()).collect();
    keys_for_chord(&names)
}

/// Parses the `keys` list of a `key_combo` action. Each entry may itself be a chord.
pub fn parse_key_combo(keys: &[String]) -> Result<Vec<Key>> {
    if keys.is_empty() {
        return Err(Error::invalid_input("key_combo with no keys"));
    }
    let mut names = Vec::new();
    for k in keys {
        if k.trim().chars().count() > 1 && k.contains('+') {
            // A model sometimes writes ["ctrl+s"] instead of ["ctrl", "s"].
            names.extend(k.split('+').map(|p| p.trim().to_string()));
        } else {
            names.push(k.clone());
        }
    }
    keys_for_chord(&names)
}

fn keys_for_chord(names: &[String]) -> Result<Vec<Key>> {
    let keys = names
        .iter()
        .map(|n| parse_key(n))
        .collect::<Result<Vec<_>>>()?;
    let has_modifier = keys.iter().any(|k| is_modifier(*k));
    Ok(keys
        .into_iter()
        .map(|k| match k {
            // Ctrl+S means the S key with Ctrl, not an upper-case 'S' (which would add Shift).
            Key::Unicode(c) if has_modifier && c.is_ascii_uppercase() => {
                Key::Unicode(c.to_ascii_lowercase())
            }
            other => other,
        })
        .collect())
}

/// What to do with a mouse button.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ButtonAction {
    /// Press and release.
    Click,
    /// Press and hold.
    Press,
    /// Release.
    Release,
}

/// The input side of a desktop: pointer, buttons, keys, text, wheel.
pub trait InputDevice {
    /// The pointer's position in input coordinates.
    fn pointer(&mut self) -> Result<InputPoint>;
    /// Moves the pointer to an absolute position.
    fn move_pointer(&mut self, to: InputPoint) -> Result<()>;
    /// Presses, releases or clicks the left button.
    fn left_button(&mut self, action: ButtonAction) -> Result<()>;
    /// Types text into whatever has the keyboard focus.
    fn text(&mut self, text: &str) -> Result<()>;
    /// Presses, releases or clicks one key.
    fn key(&mut self, key: Key, direction: Direction) -> Result<()>;
    /// Turns the wheel by `notches` (positive: down / right).
    fn scroll(&mut self, notches: i32, horizontal: bool) -> Result<()>;
}

/// Presses a chord: every key down in order, then up in reverse order. Keys already down are
/// released even when a later key fails, so no modifier stays stuck.
pub fn press_chord(input: &mut dyn InputDevice, keys: &[Key]) -> Result<()> {
    let mut down = Vec::with_capacity(keys.len());
    let mut result = Ok(());
    for &k in keys {
        match input.key(k, Direction::Press) {
            Ok(()) => down.push(k),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    for &k in down.iter().rev() {
        let released = input.key(k, Direction::Release);
        if result.is_ok() {
            result = released;
        }
    }
    result
}

/// Input through enigo (XTest on X11).
pub struct EnigoInput {
    enigo: Enigo,
}

impl std::fmt::Debug for EnigoInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnigoInput")
    }
}

impl EnigoInput {
    /// Connects to the input backend. `x11_display` overrides `$DISPLAY` on X11.
    ///
    /// Fails with a [`Error::Runner`] naming the display when no backend can be reached
    /// (no X server, no permission to synthesize input).
    pub fn connect(x11_display: Option<&str>) -> Result<Self> {
        let settings = Settings {
            x11_display: x11_display.map(str::to_string),
            // Keep held keys from leaking into the user's session if the runner dies mid-chord.
            release_keys_when_dropped: true,
            ..Settings::default()
        };
        let enigo = Enigo::new(&settings).map_err(|e| {
            let display = x11_display
                .map(str::to_string)
                .or_else(|| std::env::var("DISPLAY").ok())
                .unwrap_or_else(|| "(unset)".into());
            Error::runner_caused(
                format!(
                    "input backend unavailable (X11 display {display}; Sightline synthesizes \
                     input with XTest on X11, on macOS it needs the Accessibility permission, \
                     and a pure Wayland session without XWayland is not supported)"
                ),
                e,
            )
        })?;
        Ok(Self { enigo })
    }
}

fn input_err(what: &str, e: enigo::InputError) -> Error {
    Error::runner_caused(what, e)
}

impl InputDevice for EnigoInput {
    fn pointer(&mut self) -> Result<InputPoint> {
        let (x, y) = self
            .enigo
            .location()
            .map_err(|e| input_err("reading the pointer position", e))?;
        Ok(InputPoint { x, y })
    }

    fn move_pointer(&mut self, to: InputPoint) -> Result<()> {
        self.enigo
            .move_mouse(to.x, to.y, Coordinate::Abs)
            .map_err(|e| input_err(&format!("moving the pointer to ({},{})", to.x, to.y), e))
    }

    fn left_button(&mut self, action: ButtonAction) -> Result<()> {
        let direction = match action {
            ButtonAction::Click => Direction::Click,
            ButtonAction::Press => Direction::Press,
            ButtonAction::Release => Direction::Release,
        };
        self.enigo
            .button(Button::Left, direction)
            .map_err(|e| input_err("left button", e))
    }

    fn text(&mut self, text: &str) -> Result<()> {
        self.enigo
            .text(text)
            .map_err(|e| input_err("typing text", e))
    }

    fn key(&mut self, key: Key, direction: Direction) -> Result<()> {
        self.enigo
            .key(key, direction)
            .map_err(|e| input_err(&format!("key {key:?}"), e))
    }

    fn scroll(&mut self, notches: i32, horizontal: bool) -> Result<()> {
        let axis = if horizontal {
            Axis::Horizontal
        } else {
            Axis::Vertical
        };
        self.enigo
            .scroll(notches, axis)
            .map_err(|e| input_err("scrolling", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_key_name_parses() -> Result<()> {
        for name in KEY_NAMES.iter().chain(KEY_ALIASES) {
            #[cfg(target_os = "macos")]
            if name.eq_ignore_ascii_case("insert") || name.eq_ignore_ascii_case("ins") {
                continue;
            }
            parse_key(name)?;
        }
        Ok(())
    }

    #[test]
    fn key_names_are_case_and_separator_insensitive() -> Result<()> {
        assert_eq!(parse_key("page_up")?, Key::PageUp);
        assert_eq!(parse_key("Page-Up")?, Key::PageUp);
        assert_eq!(parse_key("ENTER")?, Key::Return);
        assert_eq!(parse_key("f12")?, Key::F12);
        assert_eq!(parse_key("a")?, Key::Unicode('a'));
        assert_eq!(parse_key(" ")?, Key::Space);
        assert!(parse_key("F0").is_err());
        assert!(parse_key("F21").is_err());
        assert!(parse_key("Hyperdrive").is_err());
        Ok(())
    }

    #[test]
    fn chords_split_on_plus_and_lowercase_letters_with_modifiers() -> Result<()> {
        assert_eq!(
            parse_key_chord("ctrl+shift+T")?,
            vec![Key::Control, Key::Shift, Key::Unicode('t')]
        );
        assert_eq!(
            parse_key_chord("ctrl++")?,
            vec![Key::Control, Key::Unicode('+')]
        );
        assert_eq!(parse_key_chord("+")?, vec![Key::Unicode('+')]);
        assert_eq!(parse_key_chord("Return")?, vec![Key::Return]);
        assert!(parse_key_chord("ctrl+").is_err());
        assert_eq!(
            parse_key_combo(&["ctrl+s".into()])?,
            vec![Key::Control, Key::Unicode('s')]
        );
        assert_eq!(
            parse_key_combo(&["alt".into(), "F4".into()])?,
            vec![Key::Alt, Key::F4]
        );
        Ok(())
    }
}
