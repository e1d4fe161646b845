//! Text forms of the enums that are named by a fixed list of names (a chat template, an
//! action dialect): `Display`, `FromStr` and `Deserialize`, all through the type's `name()`.

/// Implements `Display` (the name), `FromStr` (a trimmed name from `ALL`, else an invalid-input
/// error listing the known names, the type called `$what`) and `Deserialize` (from that
/// string) for `$ty`, which has `const ALL: &[$ty]` and `fn name(self) -> &'static str`.
///
/// ```ignore
/// named_text!(Template, "chat template");
/// ```
macro_rules! named_text {
    ($ty:ident, $what:literal) => {
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::error::Error;

            fn from_str(s: &str) -> $crate::error::Result<Self> {
                $ty::ALL
                    .iter()
                    .copied()
                    .find(|x| x.name() == s.trim())
                    .ok_or_else(|| {
                        let names: Vec<&str> = $ty::ALL.iter().map(|x| x.name()).collect();
                        $crate::error::Error::invalid_input(format!(
                            concat!("unknown ", $what, " {:?}; known: {}"),
                            s,
                            names.join(", ")
                        ))
                    })
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(
                d: D,
            ) -> std::result::Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use named_text;
