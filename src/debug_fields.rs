//! `Debug` for types that hold things without a useful `Debug` (a loaded model, a parser, a
//! socket): the fields worth printing, then `..`.

/// Implements `Debug` for `$ty`, printing only the named fields and `..` for the rest.
///
/// ```ignore
/// debug_fields!(Runner { options });
/// ```
macro_rules! debug_fields {
    ($ty:ident { $($field:ident),* }) => {
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($field), &self.$field))*
                    .finish_non_exhaustive()
            }
        }
    };
}

pub(crate) use debug_fields;
