//! Tolerant serde field readers that match what fastjson accepts from other clients, and the
//! macro that defines Java enums carried by name in JSON.
//!
//! fastjson turns `null` into a field's default, reads numbers written as strings (the C++
//! client sends `"subVersion":"1700000000000"`) and reads enums by name or by ordinal (the C++
//! client sends `"consumeType":1`). These helpers give serde the same tolerance. Output stays
//! strict: numbers as numbers, enums as names. Not here: the bare integer object keys, which
//! `crate::json` handles before serde sees the text.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::Deserialize;

/// Reads a field that may be `null`, using the type's default for `null`.
pub(crate) fn or_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Reads an integer given as a JSON number, a numeric string, or `null` (the default, 0).
pub(crate) fn int<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i64> + TryFrom<u64> + Default,
{
    deserializer.deserialize_any(IntVisitor(PhantomData))
}

struct IntVisitor<T>(PhantomData<T>);

impl<'de, T> Visitor<'de> for IntVisitor<T>
where
    T: TryFrom<i64> + TryFrom<u64> + Default,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer, a string holding an integer, or null")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        // Only integral values are accepted; a fraction means the peer sent something else.
        let in_range = v.is_finite() && v.fract() == 0.0 && v.abs() < 9.0e15;
        if in_range {
            // Integral and below 2^53, so the conversion is exact.
            return self.visit_i64(v as i64);
        }
        Err(E::invalid_value(Unexpected::Float(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        let trimmed = v.trim();
        if trimmed.is_empty() {
            return Ok(T::default());
        }
        match trimmed.parse::<i64>() {
            Ok(n) => self.visit_i64(n),
            Err(_) => match trimmed.parse::<u64>() {
                Ok(n) => self.visit_u64(n),
                Err(_) => Err(E::invalid_value(Unexpected::Str(v), &self)),
            },
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_none<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }
}

/// Reads a boolean given as `true`/`false`, the strings `"true"`/`"false"`, 0/1, or `null`
/// (false).
pub(crate) fn boolean<'de, D>(deserializer: D) -> Result<bool, D::Error>
where
    D: Deserializer<'de>,
{
    deserializer.deserialize_any(BoolVisitor)
}

struct BoolVisitor;

impl Visitor<'_> for BoolVisitor {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a boolean, \"true\"/\"false\", 0/1, or null")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        match v {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(E::invalid_value(Unexpected::Signed(v), &self)),
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        match v {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(E::invalid_value(Unexpected::Unsigned(v), &self)),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        let trimmed = v.trim();
        if trimmed.eq_ignore_ascii_case("true") || trimmed == "1" {
            Ok(true)
        } else if trimmed.is_empty() || trimmed.eq_ignore_ascii_case("false") || trimmed == "0" {
            Ok(false)
        } else {
            Err(E::invalid_value(Unexpected::Str(v), &self))
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_none<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}

/// Defines a Java enum that JSON carries by its Java name.
///
/// Each variant is `Variant = "JAVA_NAME"`, optionally followed by `| "ALIAS"` names also
/// accepted on input. Variants are listed in Java declaration order, so the position is the
/// Java ordinal, which some clients send instead of the name. Output is always the Java name.
macro_rules! java_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $java:literal $(| $alias:literal)*,
            )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $(
                $(#[$vmeta])*
                $variant,
            )+
        }

        impl $name {
            /// Every variant in Java declaration (ordinal) order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The Java enum constant name, as written in JSON.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $java,)+
                }
            }

            /// Looks a variant up by Java name (or an accepted alias).
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($java $(| $alias)* => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// Looks a variant up by Java ordinal.
            pub fn from_ordinal(ordinal: i64) -> Option<Self> {
                usize::try_from(ordinal).ok().and_then(|i| Self::ALL.get(i).copied())
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct EnumVisitor;

                impl ::serde::de::Visitor<'_> for EnumVisitor {
                    type Value = $name;

                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        write!(f, "a {} name or ordinal", stringify!($name))
                    }

                    fn visit_str<E: ::serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        $name::from_name(v.trim()).ok_or_else(|| {
                            E::invalid_value(::serde::de::Unexpected::Str(v), &self)
                        })
                    }

                    fn visit_i64<E: ::serde::de::Error>(self, v: i64) -> Result<$name, E> {
                        $name::from_ordinal(v).ok_or_else(|| {
                            E::invalid_value(::serde::de::Unexpected::Signed(v), &self)
                        })
                    }

                    fn visit_u64<E: ::serde::de::Error>(self, v: u64) -> Result<$name, E> {
                        i64::try_from(v)
                            .ok()
                            .and_then($name::from_ordinal)
                            .ok_or_else(|| {
                                E::invalid_value(::serde::de::Unexpected::Unsigned(v), &self)
                            })
                    }
                }

                d.deserialize_any(EnumVisitor)
            }
        }
    };
}

pub(crate) use java_enum;

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize)]
    #[serde(default)]
    struct Sample {
        #[serde(deserialize_with = "super::int")]
        small: i32,
        #[serde(deserialize_with = "super::int")]
        big: i64,
        #[serde(deserialize_with = "super::boolean")]
        flag: bool,
        #[serde(deserialize_with = "super::or_default")]
        name: String,
    }

    fn sample(json: &str) -> Result<Sample, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn int_accepts_numbers_strings_and_null() {
        let s = sample(r#"{"small":-3,"big":"1700000000000"}"#).unwrap();
        assert_eq!((s.small, s.big), (-3, 1_700_000_000_000));
        let s = sample(r#"{"small":null,"big":" 7 "}"#).unwrap();
        assert_eq!((s.small, s.big), (0, 7));
        let s = sample(r#"{"small":""}"#).unwrap();
        assert_eq!(s.small, 0);
        let s = sample(r#"{"small":4.0}"#).unwrap();
        assert_eq!(s.small, 4);
    }

    #[test]
    fn int_rejects_out_of_range_and_garbage() {
        assert!(sample(r#"{"small":4294967296}"#).is_err());
        assert!(sample(r#"{"small":"12x"}"#).is_err());
        assert!(sample(r#"{"small":1.5}"#).is_err());
        assert!(sample(r#"{"small":[1]}"#).is_err());
    }

    #[test]
    fn boolean_accepts_java_spellings() {
        assert!(sample(r#"{"flag":true}"#).unwrap().flag);
        assert!(sample(r#"{"flag":"TRUE"}"#).unwrap().flag);
        assert!(sample(r#"{"flag":1}"#).unwrap().flag);
        assert!(!sample(r#"{"flag":null}"#).unwrap().flag);
        assert!(!sample(r#"{"flag":"false"}"#).unwrap().flag);
        assert!(sample(r#"{"flag":"yes"}"#).is_err());
    }

    #[test]
    fn or_default_turns_null_into_default() {
        assert_eq!(sample(r#"{"name":null}"#).unwrap().name, "");
        assert_eq!(sample(r#"{"name":"g"}"#).unwrap().name, "g");
    }
}
