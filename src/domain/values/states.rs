//! The one mapping between a state's enum and its text. Every state or status the service
//! keeps (in a column, a job payload, the API or a form) is declared with [`string_enum!`],
//! which gives it the text in both directions, the database conversions and serde, so no
//! module writes its own `match` from or to a string.

use std::fmt;

/// A text that names none of an enum's variants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownState {
    /// The enum's name, e.g. `Status`.
    pub kind: &'static str,
    pub value: String,
}

impl fmt::Display for UnknownState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} {:?}", self.kind, self.value)
    }
}

impl std::error::Error for UnknownState {}

/// Declares a fieldless enum together with its text for each variant:
///
/// ```ignore
/// string_enum!(
///     /// doc comment
///     pub Status { Active => "active", Paused => "paused" }
/// );
/// ```
///
/// The enum gets `ALL`, `as_str`, `parse`, `FromStr` (the error names the unknown text),
/// `Display`, rusqlite's `ToSql`/`FromSql` and serde's `Serialize`/`Deserialize`, all as the
/// text.
#[macro_export]
macro_rules! string_enum {
    ($(#[$meta:meta])* $vis:vis $name:ident {
        $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The text stored and served for this variant.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// The variant whose text is exactly `text`.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::domain::values::states::UnknownState;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                Self::parse(text).ok_or_else(|| $crate::domain::values::states::UnknownState {
                    kind: stringify!($name),
                    value: text.to_string(),
                })
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> ::rusqlite::Result<::rusqlite::types::ToSqlOutput<'_>> {
                Ok(::rusqlite::types::ToSqlOutput::from(self.as_str()))
            }
        }

        impl ::rusqlite::types::FromSql for $name {
            fn column_result(
                value: ::rusqlite::types::ValueRef<'_>,
            ) -> ::rusqlite::types::FromSqlResult<Self> {
                let text = value.as_str()?;
                text.parse().map_err(|e| ::rusqlite::types::FromSqlError::Other(Box::new(e)))
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(d)?;
                text.parse().map_err(::serde::de::Error::custom)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    string_enum!(
        /// For the tests.
        Colour { Red => "red", DarkBlue => "dark_blue" }
    );

    #[test]
    fn one_mapping_in_every_direction() {
        assert_eq!(Colour::ALL, &[Colour::Red, Colour::DarkBlue]);
        assert_eq!(Colour::DarkBlue.as_str(), "dark_blue");
        assert_eq!(Colour::parse("red"), Some(Colour::Red));
        assert_eq!(Colour::parse("Red"), None);
        assert_eq!(Colour::DarkBlue.to_string(), "dark_blue");
        let err = "green".parse::<Colour>().unwrap_err();
        assert_eq!(err.to_string(), "unknown Colour \"green\"");

        assert_eq!(
            serde_json::to_string(&Colour::DarkBlue).unwrap(),
            "\"dark_blue\""
        );
        let back: Colour = serde_json::from_str("\"red\"").unwrap();
        assert_eq!(back, Colour::Red);
        assert!(serde_json::from_str::<Colour>("\"green\"").is_err());

        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let text: String = conn
            .query_row("SELECT ?1", [Colour::DarkBlue], |r| r.get(0))
            .unwrap();
        assert_eq!(text, "dark_blue");
        let colour: Colour = conn.query_row("SELECT 'red'", [], |r| r.get(0)).unwrap();
        assert_eq!(colour, Colour::Red);
        let bad = conn.query_row("SELECT 'green'", [], |r| r.get::<_, Colour>(0));
        assert!(bad.is_err());
    }
}
