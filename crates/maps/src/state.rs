//! `STATE.json`: initial (and dumped) map contents, applied identically to
//! every engine, the kernel included. See DESIGN.md for the format.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Map name → entries, in file order.
pub type MapState = BTreeMap<String, Vec<EntryState>>;

/// One entry. Exactly one of `value`, `values`, `inner`, `prog` is set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryState {
    /// Hex bytes of the key (spaces allowed).
    pub key: String,
    /// Hex bytes of the value; for a per-CPU map, every CPU's slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Per-CPU values, one per CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    /// A new inner map for ARRAY_OF_MAPS / HASH_OF_MAPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner: Option<InnerMapState>,
    /// A program name of the same object, for PROG_ARRAY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prog: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InnerMapState {
    /// Map type name as bpftool spells it: "hash", "lru_hash", "array", ...
    #[serde(rename = "type")]
    pub map_type: String,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    #[serde(default)]
    pub flags: u32,
    #[serde(default)]
    pub entries: Vec<EntryState>,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("invalid hex {text:?}: {why}")]
    BadHex { text: String, why: &'static str },
    #[error("state file: {0}")]
    Json(#[from] serde_json::Error),
    #[error("state file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// Parse hex bytes; whitespace anywhere is ignored, an optional `0x` prefix is allowed.
pub fn parse_hex(text: &str) -> Result<Vec<u8>, StateError> {
    let t = text.trim();
    let t = t.strip_prefix("0x").unwrap_or(t);
    let digits: Vec<u8> = t.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(StateError::BadHex {
            text: text.into(),
            why: "odd number of hex digits",
        });
    }
    let nib = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    digits
        .chunks(2)
        .map(|p| match (nib(p[0]), nib(p[1])) {
            (Some(h), Some(l)) => Ok(h << 4 | l),
            _ => Err(StateError::BadHex {
                text: text.into(),
                why: "not a hex digit",
            }),
        })
        .collect()
}

/// Format bytes as lowercase hex, no separators.
pub fn to_hex(bytes: &[u8]) -> String {
    // Dumps format millions of values (katran's ring): one table lookup per
    // byte instead of the formatting machinery.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = Vec::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 0xf)]);
    }
    String::from_utf8(out).expect("hex digits are ASCII")
}

pub fn load_state(path: &std::path::Path) -> Result<MapState, StateError> {
    let text = std::fs::read_to_string(path).map_err(|source| StateError::Io {
        path: path.display().to_string(),
        source,
    })?;
    Ok(serde_json::from_str(&text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_with_spaces_and_prefix() {
        assert_eq!(parse_hex("0a c8 0101").unwrap(), vec![0x0a, 0xc8, 1, 1]);
        assert_eq!(parse_hex("0xFF").unwrap(), vec![0xff]);
        assert!(parse_hex("abc").is_err());
        assert!(parse_hex("zz").is_err());
        assert_eq!(to_hex(&[0, 0xab]), "00ab");
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(to_hex(&all), expected);
    }

    #[test]
    fn parses_design_example() {
        let s: MapState = serde_json::from_str(
            r#"{"vip_map": [{"key": "0ac80101", "value": "00000000 00000000"}],
                "pcpu": [{"key": "00000000", "values": ["01", "00"]}],
                "lru": [{"key": "00000000", "inner": {"type": "lru_hash", "key_size": 40,
                         "value_size": 16, "max_entries": 1000, "entries": []}}]}"#,
        )
        .unwrap();
        assert_eq!(s["pcpu"][0].values.as_ref().unwrap().len(), 2);
        assert_eq!(s["lru"][0].inner.as_ref().unwrap().map_type, "lru_hash");
    }
}
