//! Conversion of one header field between its Rust type and its `extFields` text.

use crate::command::ExtFields;
use crate::header::HeaderError;

/// A type usable as a header field. Bare types are required; `Option<T>` is optional.
pub trait HeaderField: Sized {
    /// Reads the field `key` of header `header` from `ext`.
    ///
    /// # Errors
    /// [`HeaderError::MissingField`] for an absent required field,
    /// [`HeaderError::InvalidValue`] for unparsable text.
    fn read(ext: &ExtFields, key: &'static str, header: &'static str) -> Result<Self, HeaderError> {
        Self::from_text(ext.get(key), key, header)
    }

    /// The field from its text, `None` when the key is absent (headers read every field in
    /// one pass over the map, then convert each).
    ///
    /// # Errors
    /// As [`HeaderField::read`].
    fn from_text(text: Option<&str>, key: &'static str, header: &'static str) -> Result<Self, HeaderError>;

    /// Writes the field under `key`; absent optional values write nothing.
    fn write(&self, ext: &mut ExtFields, key: &'static str);
}

/// A value with a text form in `extFields`.
pub trait FieldValue: Sized {
    /// What the text should look like, for error messages.
    const EXPECTED: &'static str;
    /// Parses Java's text form.
    fn parse(text: &str) -> Option<Self>;
    /// Appends Java's text form to `out`.
    fn render(&self, out: &mut String);
}

impl FieldValue for String {
    const EXPECTED: &'static str = "a string";
    fn parse(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
    fn render(&self, out: &mut String) {
        out.push_str(self)
    }
}

macro_rules! integer_field {
    ($($t:ty => $expected:literal),*) => {$(
        impl FieldValue for $t {
            const EXPECTED: &'static str = $expected;
            fn parse(text: &str) -> Option<Self> {
                // Java's Integer.parseInt / Long.parseLong: optional sign, decimal digits, no
                // surrounding blanks.
                text.parse().ok()
            }
            fn render(&self, out: &mut String) {
                out.push_str(crate::decimal::Decimal::new(i64::from(*self)).as_str());
            }
        }
    )*};
}
integer_field!(i32 => "a 32-bit integer", i64 => "a 64-bit integer");

impl FieldValue for f64 {
    const EXPECTED: &'static str = "a number";
    fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
    fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(out, "{self}");
    }
}

impl FieldValue for bool {
    const EXPECTED: &'static str = "a boolean";
    /// Java's `Boolean.parseBoolean`: "true" in any case is true, anything else false.
    fn parse(text: &str) -> Option<Self> {
        Some(text.eq_ignore_ascii_case("true"))
    }
    fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(out, "{self}");
    }
}

fn parse_present<T: FieldValue>(text: &str, key: &'static str, header: &'static str) -> Result<T, HeaderError> {
    T::parse(text).ok_or_else(|| HeaderError::InvalidValue {
        header,
        field: key,
        value: text.to_owned(),
        expected: T::EXPECTED,
    })
}

impl<T: FieldValue> HeaderField for T {
    fn from_text(text: Option<&str>, key: &'static str, header: &'static str) -> Result<Self, HeaderError> {
        match text {
            Some(text) => parse_present(text, key, header),
            None => Err(HeaderError::MissingField { header, field: key }),
        }
    }
    fn write(&self, ext: &mut ExtFields, key: &'static str) {
        ext.insert_with(std::borrow::Cow::Borrowed(key), |out| self.render(out));
    }
}

impl<T: FieldValue> HeaderField for Option<T> {
    fn from_text(text: Option<&str>, key: &'static str, header: &'static str) -> Result<Self, HeaderError> {
        text.map(|text| parse_present(text, key, header)).transpose()
    }
    fn write(&self, ext: &mut ExtFields, key: &'static str) {
        if let Some(v) = self {
            ext.insert_with(std::borrow::Cow::Borrowed(key), |out| v.render(out));
        }
    }
}
