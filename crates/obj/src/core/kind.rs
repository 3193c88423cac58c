//! The relocation kinds of `enum bpf_core_relo_kind` (kernel `uapi/linux/bpf.h`).

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreKind {
    FieldByteOffset,
    FieldByteSize,
    FieldExists,
    FieldSigned,
    FieldLshiftU64,
    FieldRshiftU64,
    TypeIdLocal,
    TypeIdTarget,
    TypeExists,
    TypeSize,
    EnumvalExists,
    EnumvalValue,
    TypeMatches,
}

impl CoreKind {
    pub fn from_raw(raw: u32) -> Option<CoreKind> {
        use CoreKind::*;
        Some(match raw {
            0 => FieldByteOffset,
            1 => FieldByteSize,
            2 => FieldExists,
            3 => FieldSigned,
            4 => FieldLshiftU64,
            5 => FieldRshiftU64,
            6 => TypeIdLocal,
            7 => TypeIdTarget,
            8 => TypeExists,
            9 => TypeSize,
            10 => EnumvalExists,
            11 => EnumvalValue,
            12 => TypeMatches,
            _ => return None,
        })
    }

    /// Relocations about a field reached through an access string.
    pub fn is_field(self) -> bool {
        use CoreKind::*;
        matches!(
            self,
            FieldByteOffset
                | FieldByteSize
                | FieldExists
                | FieldSigned
                | FieldLshiftU64
                | FieldRshiftU64
        )
    }

    /// Relocations about a whole type (access string `"0"`).
    pub fn is_type(self) -> bool {
        use CoreKind::*;
        matches!(
            self,
            TypeIdLocal | TypeIdTarget | TypeExists | TypeSize | TypeMatches
        )
    }

    /// Relocations about one enumerator (access string `"N"`, its index).
    pub fn is_enumval(self) -> bool {
        matches!(self, CoreKind::EnumvalExists | CoreKind::EnumvalValue)
    }
}

impl fmt::Display for CoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use CoreKind::*;
        f.write_str(match self {
            FieldByteOffset => "field byte offset",
            FieldByteSize => "field byte size",
            FieldExists => "field exists",
            FieldSigned => "field signedness",
            FieldLshiftU64 => "field lshift_u64",
            FieldRshiftU64 => "field rshift_u64",
            TypeIdLocal => "local type id",
            TypeIdTarget => "target type id",
            TypeExists => "type exists",
            TypeSize => "type size",
            EnumvalExists => "enum value exists",
            EnumvalValue => "enum value",
            TypeMatches => "type matches",
        })
    }
}
