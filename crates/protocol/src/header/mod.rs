//! Typed request and response headers carried in `extFields`.
//!
//! Each header is a plain struct; the `command_header!` macro writes its conversion to and from
//! the string map, keyed by RocketMQ's Java field names. A required field is a bare type and
//! its absence is an error naming the field (Java: `@CFNotNull`); an optional field is an
//! `Option`. Values use Java's text forms: decimal integers, `true`/`false`.

mod acl;
mod admin;
mod auth;
mod client;
mod controller;
mod field;
mod namesrv;
mod offset;
mod pop;
mod pull;
mod query;
mod send;
mod transaction;

pub use acl::*;
pub use admin::*;
pub use auth::*;
pub use client::*;
pub use controller::*;
pub use field::HeaderField;
pub use namesrv::*;
pub use offset::*;
pub use pop::*;
pub use pull::*;
pub use query::*;
pub use send::*;
pub use transaction::*;

use crate::command::ExtFields;

/// Why a header could not be read from `extFields`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// A required field is absent.
    #[error("the custom field <{field}> is null (required by {header})")]
    MissingField {
        /// Header type name.
        header: &'static str,
        /// Java field name.
        field: &'static str,
    },
    /// A field's text is not a valid value of its type.
    #[error("the custom field <{field}> of {header} has invalid value {value:?}: expected {expected}")]
    InvalidValue {
        /// Header type name.
        header: &'static str,
        /// Java field name.
        field: &'static str,
        /// The text received.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
}

/// A header that converts to and from `extFields`.
pub trait CommandHeader: Sized {
    /// Writes every present field into `ext`.
    fn write_ext_fields(&self, ext: &mut ExtFields);

    /// Reads the header, checking required fields and value syntax.
    ///
    /// # Errors
    /// [`HeaderError`] naming the first offending field.
    fn read_ext_fields(ext: &ExtFields) -> Result<Self, HeaderError>;

    /// The header as a fresh map.
    fn to_ext_fields(&self) -> ExtFields {
        let mut ext = ExtFields::new();
        self.write_ext_fields(&mut ext);
        ext
    }
}

/// Declares a header struct and its `CommandHeader` impl.
///
/// ```text
/// command_header! {
///     /// Doc.
///     pub struct GetRouteInfoRequestHeader {
///         /// Doc.
///         pub topic: String => "topic",
///         pub accept_standard_json_only: Option<bool> => "acceptStandardJsonOnly",
///     }
/// }
/// ```
macro_rules! command_header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty => $key:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $crate::header::CommandHeader for $name {
            fn write_ext_fields(&self, ext: &mut $crate::command::ExtFields) {
                $( $crate::header::HeaderField::write(&self.$field, ext, $key); )*
                let _ = ext;
            }

            fn read_ext_fields(ext: &$crate::command::ExtFields) -> Result<Self, $crate::header::HeaderError> {
                // One pass over the map, each key matched against the header's names, instead
                // of a lookup per field (a send header has fourteen).
                $( let mut $field: Option<&str> = None; )*
                for (key, text) in ext.iter() {
                    match key {
                        $( $key => $field = Some(text), )*
                        _ => {}
                    }
                }
                Ok($name {
                    $( $field: $crate::header::HeaderField::from_text($field, $key, stringify!($name))?, )*
                })
            }
        }
    };
}
pub(crate) use command_header;
