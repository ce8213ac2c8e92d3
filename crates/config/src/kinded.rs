//! Settings that pick one of several kinds, each with its own parameters: a rule's `controller`
//! and the household `budget`. Written as a kind name (`controller = "vulture"`) or a table with
//! `kind` and the kind's parameters (`{ kind = "fixed_window", window_bytes = 65535 }`); in UCI, an
//! option with the kind and the parameters as options of the same section.
//!
//! Each kind is one raw struct (its parameters, serde-derived, every field optional) with one
//! [`Kind::validate`]; the [`kinds!`] macro lists the kinds of a setting and derives the rest: the
//! enum, the known names, the parameter names (read off the structs, so UCI's option lists and the
//! "is a vulture parameter" messages cannot drift), and the reading of both syntaxes. Adding a
//! kind is one struct, one `impl Kind` and one line in the `kinds!` list.
//!
//! Problems in a kind's table (unknown kind, a parameter of another kind, a wrong type) are kept as
//! a [`FieldError`] for the validator to report with the field path, in TOML as in UCI, instead of
//! failing inside serde with only a line number.

use serde::de::{self, DeserializeOwned, Deserializer, IntoDeserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::marker::PhantomData;

use crate::Validator;

/// A problem with one field of a kind's table; `field` is relative to the setting (`kind`,
/// `window_bytes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub field: String,
    pub message: String,
}

/// One kind's parameters: a raw struct and how it becomes the real config.
pub(crate) trait Kind: DeserializeOwned {
    type Out;
    /// Checks the parameters and builds the config; `path` is the setting's field path
    /// (`rules[0].controller`), parameters are `{path}.{field}`.
    fn validate(self, v: &Validator, path: &str) -> Result<Self::Out, crate::ConfigError>;
}

/// The kinds of one setting; implemented by [`kinds!`].
pub(crate) trait Kinds: Sized {
    type Out;
    /// What the kind is called in messages ("controller").
    const WHAT: &'static str;
    /// The kind names, in documentation order.
    const KINDS: &'static [&'static str];
    /// Parameter names of a kind (empty for an unknown one).
    fn fields(kind: &str) -> &'static [&'static str];
    /// Reads the parameters of a known kind; `None` for an unknown kind.
    fn deserialize_kind<'de, D: Deserializer<'de>>(kind: &str, params: D) -> Option<Result<Self, D::Error>>;
    fn validate(self, v: &Validator, path: &str) -> Result<Self::Out, crate::ConfigError>;

    /// Every parameter name of every kind, each once, in kind order.
    fn all_fields() -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for kind in Self::KINDS {
            for f in Self::fields(kind) {
                if !out.contains(f) {
                    out.push(f);
                }
            }
        }
        out
    }

    /// `"a", "b" or "c"`.
    fn expected() -> String {
        let names: Vec<String> = Self::KINDS.iter().map(|k| format!("{k:?}")).collect();
        match names.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

/// Declares the raw enum of a setting's kinds: `name => Variant(RawStruct)`, one line per kind.
macro_rules! kinds {
    (
        $(#[$meta:meta])*
        $vis:vis enum $Enum:ident ($what:literal) -> $Out:ty {
            $( $name:literal => $Variant:ident($Raw:ty), )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug)]
        $vis enum $Enum {
            $( $Variant($Raw), )+
        }

        impl $crate::kinded::Kinds for $Enum {
            type Out = $Out;
            const WHAT: &'static str = $what;
            const KINDS: &'static [&'static str] = &[$($name),+];

            fn fields(kind: &str) -> &'static [&'static str] {
                match kind {
                    $( $name => $crate::kinded::field_names::<$Raw>(), )+
                    _ => &[],
                }
            }

            fn deserialize_kind<'de, D: serde::Deserializer<'de>>(
                kind: &str,
                params: D,
            ) -> Option<Result<Self, D::Error>> {
                match kind {
                    $( $name => Some(<$Raw as serde::Deserialize>::deserialize(params).map($Enum::$Variant)), )+
                    _ => None,
                }
            }

            fn validate(
                self,
                v: &$crate::Validator,
                path: &str,
            ) -> Result<$Out, $crate::ConfigError> {
                match self {
                    $( $Enum::$Variant(raw) => $crate::kinded::Kind::validate(raw, v, path), )+
                }
            }
        }
    };
}
pub(crate) use kinds;

/// A setting as read: its kind with parameters, or what is wrong with it.
#[derive(Debug)]
pub(crate) struct Kinded<E>(pub Result<E, FieldError>);

impl<E: Kinds> Kinded<E> {
    /// The setting from its kind name and parameters, as both syntaxes give them.
    pub(crate) fn build<'de, V>(kind: &str, params: Vec<(String, V)>) -> Self
    where
        V: Deserializer<'de>,
        V::Error: fmt::Display,
    {
        let fail = |field: &str, message: String| {
            Kinded(Err(FieldError {
                field: field.to_owned(),
                message,
            }))
        };
        if !E::KINDS.contains(&kind) {
            return fail(
                "kind",
                format!("unknown {} {kind:?}, expected {}", E::WHAT, E::expected()),
            );
        }
        let fields = E::fields(kind);
        if let Some((name, _)) = params.iter().find(|(name, _)| !fields.contains(&name.as_str())) {
            let owners: Vec<&str> = E::KINDS
                .iter()
                .copied()
                .filter(|k| E::fields(k).contains(&name.as_str()))
                .collect();
            let message = if !owners.is_empty() {
                format!("is a {} parameter, not a {kind} one", owners.join(" and "))
            } else if fields.is_empty() {
                format!("unknown parameter; {kind} takes none")
            } else {
                format!("unknown parameter; {kind} takes {}", fields.join(", "))
            };
            return fail(name, message);
        }
        match E::deserialize_kind(kind, Params::new(params)) {
            Some(Ok(value)) => Kinded(Ok(value)),
            Some(Err(e)) => fail(e.field.as_deref().unwrap_or("kind"), e.message),
            None => unreachable!("kind checked above"),
        }
    }

    /// Checks the parameters and builds the config, or reports the problem at `path.field`.
    pub(crate) fn validate(self, v: &Validator, path: &str) -> Result<E::Out, crate::ConfigError> {
        match self.0 {
            Ok(raw) => raw.validate(v, path),
            Err(e) => Err(v.err(format!("{path}.{}", e.field), e.message)),
        }
    }
}

/// TOML: a kind name, or a table with `kind` and the kind's parameters.
impl<'de, E: Kinds> Deserialize<'de> for Kinded<E> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<E>(PhantomData<E>);
        impl<'de, E: Kinds> Visitor<'de> for V<E> {
            type Value = Kinded<E>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a {} name ({}) or a table with `kind`", E::WHAT, E::expected())
            }
            fn visit_str<Er: de::Error>(self, kind: &str) -> Result<Kinded<E>, Er> {
                Ok(Kinded::build(kind, Vec::<(String, toml::Value)>::new()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Kinded<E>, A::Error> {
                let table = toml::Table::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let mut kind = None;
                let mut params = Vec::new();
                for (name, value) in table {
                    if name == "kind" {
                        kind = Some(value);
                    } else {
                        params.push((name, value));
                    }
                }
                Ok(match kind {
                    Some(toml::Value::String(kind)) => Kinded::build(&kind, params),
                    other => Kinded(Err(FieldError {
                        field: "kind".to_owned(),
                        message: format!(
                            "{}; expected a {} name: {}",
                            if other.is_some() {
                                "is not a string"
                            } else {
                                "is required"
                            },
                            E::WHAT,
                            E::expected()
                        ),
                    })),
                })
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A parameter error, with the parameter it came from when known.
#[derive(Debug)]
pub(crate) struct ParamError {
    field: Option<String>,
    message: String,
}

impl ParamError {
    pub(crate) fn new(message: String) -> Self {
        ParamError { field: None, message }
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ParamError {}

impl de::Error for ParamError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ParamError::new(msg.to_string())
    }
}

/// A kind's parameters as a serde map whose value errors name their parameter.
struct Params<V> {
    entries: std::vec::IntoIter<(String, V)>,
    current: Option<(String, V)>,
}

impl<V> Params<V> {
    fn new(entries: Vec<(String, V)>) -> Self {
        Params {
            entries: entries.into_iter(),
            current: None,
        }
    }
}

impl<'de, Val> Deserializer<'de> for Params<Val>
where
    Val: Deserializer<'de>,
    Val::Error: fmt::Display,
{
    type Error = ParamError;

    fn deserialize_any<Vis: Visitor<'de>>(self, visitor: Vis) -> Result<Vis::Value, ParamError> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de, Val> MapAccess<'de> for Params<Val>
where
    Val: Deserializer<'de>,
    Val::Error: fmt::Display,
{
    type Error = ParamError;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ParamError> {
        let Some((name, value)) = self.entries.next() else {
            return Ok(None);
        };
        let key = seed.deserialize(name.clone().into_deserializer())?;
        self.current = Some((name, value));
        Ok(Some(key))
    }

    fn next_value_seed<S: de::DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, ParamError> {
        let (name, value) = self
            .current
            .take()
            .ok_or_else(|| ParamError::new("value without a key".to_owned()))?;
        seed.deserialize(value).map_err(|e| ParamError {
            field: Some(name),
            message: e.to_string().trim().to_owned(),
        })
    }
}

/// The field names of a serde-derived struct, as its `Deserialize` impl declares them.
pub(crate) fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Probe;
    #[derive(Debug)]
    struct Found(&'static [&'static str]);
    impl fmt::Display for Found {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("field names")
        }
    }
    impl std::error::Error for Found {}
    impl de::Error for Found {
        fn custom<T: fmt::Display>(_: T) -> Self {
            Found(&[])
        }
    }
    impl<'de> Deserializer<'de> for Probe {
        type Error = Found;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Found> {
            Err(Found(&[]))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Found> {
            Err(Found(fields))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    match T::deserialize(Probe) {
        Err(Found(fields)) => fields,
        Ok(_) => &[],
    }
}
