//! The wire name of an internally tagged enum's variant, as serde writes
//! it (`"kind": "text_delta"`): read by serializing the value into a
//! serializer that keeps the tag field and stops there, so the names are
//! never a second, hand-kept copy of the serde attributes.

use std::fmt;
use std::sync::Mutex;

use serde::Serialize;
use serde::ser::{self, Impossible};

/// The value of the `tag` field `value` serializes with, if it has one.
pub fn tag_of<T: Serialize + ?Sized>(value: &T, tag: &'static str) -> Option<&'static str> {
    let mut found = None;
    // The serializer stops with an error once it has the tag.
    let _ = value.serialize(TagSerializer { tag, found: &mut found });
    found
}

/// Tags are few (one per variant): each is kept once for the process,
/// so reading one again allocates nothing.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = names.iter().find(|n| **n == name) {
        return n;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.push(leaked);
    leaked
}

#[derive(Debug)]
struct Stop;

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tag read")
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Stop
    }
}

struct TagSerializer<'a> {
    tag: &'static str,
    found: &'a mut Option<&'static str>,
}

/// The tag's value: a string.
struct StrSerializer<'a>(&'a mut Option<&'static str>);

macro_rules! refuse {
    ($($name:ident($($arg:ty),*)),* $(,)?) => {
        $(fn $name(self $(, _: $arg)*) -> Result<Self::Ok, Self::Error> { Err(Stop) })*
    };
}

macro_rules! refuse_compound {
    () => {
        type SerializeSeq = Impossible<(), Stop>;
        type SerializeTuple = Impossible<(), Stop>;
        type SerializeTupleStruct = Impossible<(), Stop>;
        type SerializeTupleVariant = Impossible<(), Stop>;
        type SerializeMap = Impossible<(), Stop>;
        type SerializeStructVariant = Impossible<(), Stop>;

        refuse!(
            serialize_bool(bool),
            serialize_i8(i8),
            serialize_i16(i16),
            serialize_i32(i32),
            serialize_i64(i64),
            serialize_u8(u8),
            serialize_u16(u16),
            serialize_u32(u32),
            serialize_u64(u64),
            serialize_f32(f32),
            serialize_f64(f64),
            serialize_char(char),
            serialize_bytes(&[u8]),
            serialize_none(),
            serialize_unit(),
            serialize_unit_struct(&'static str),
            serialize_unit_variant(&'static str, u32, &'static str),
        );

        fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Stop> {
            Err(Stop)
        }
        fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, _: &T) -> Result<(), Stop> {
            Err(Stop)
        }
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<(), Stop> {
            Err(Stop)
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Stop> {
            Err(Stop)
        }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Stop> {
            Err(Stop)
        }
        fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Stop> {
            Err(Stop)
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, Stop> {
            Err(Stop)
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Stop> {
            Err(Stop)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, Stop> {
            Err(Stop)
        }
    };
}

impl<'a> ser::Serializer for TagSerializer<'a> {
    type Ok = ();
    type Error = Stop;
    type SerializeStruct = TagField<'a>;
    refuse_compound!();

    fn serialize_str(self, _: &str) -> Result<(), Stop> {
        Err(Stop)
    }

    /// An internally tagged variant is a struct whose first field is the tag.
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<TagField<'a>, Stop> {
        Ok(TagField { tag: self.tag, found: self.found })
    }
}

struct TagField<'a> {
    tag: &'static str,
    found: &'a mut Option<&'static str>,
}

impl ser::SerializeStruct for TagField<'_> {
    type Ok = ();
    type Error = Stop;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Stop> {
        if key == self.tag {
            let _ = value.serialize(StrSerializer(self.found));
        }
        Err(Stop)
    }

    fn end(self) -> Result<(), Stop> {
        Err(Stop)
    }
}

impl ser::Serializer for StrSerializer<'_> {
    type Ok = ();
    type Error = Stop;
    type SerializeStruct = Impossible<(), Stop>;
    refuse_compound!();

    fn serialize_str(self, v: &str) -> Result<(), Stop> {
        *self.0 = Some(intern(v));
        Ok(())
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Stop> {
        Err(Stop)
    }
}

#[cfg(test)]
mod tests {
    use crate::EventKind;

    #[test]
    fn the_name_is_what_serde_writes() {
        let kinds = [
            EventKind::TextDelta { text: "x".into() },
            EventKind::HistoryCleared {},
            EventKind::CancelRequested {},
            EventKind::Unknown,
        ];
        for kind in kinds {
            let json = serde_json::to_value(&kind).unwrap();
            assert_eq!(Some(kind.name()), json["kind"].as_str(), "{json}");
        }
    }

    #[test]
    fn a_name_is_kept_once() {
        let a = EventKind::TextDelta { text: "a".into() }.name();
        let b = EventKind::TextDelta { text: "b".into() }.name();
        assert!(std::ptr::eq(a, b));
    }
}
