//! Printing a test run: one JSON object (the DESIGN.md contract) or text for
//! a person, in the spirit of `bpftool prog run` but with the action named
//! and the output frame always shown, since "what did the program do to my
//! packet" is the question a test run answers.

use super::engine::{Ringbufs, RunOutcome};
use bpfjet_maps::state::{to_hex, MapState};
use serde::Serialize;

/// The XDP action a return value stands for, with the names `run --json` uses.
pub fn action_name(retval: u32) -> &'static str {
    match retval {
        0 => "ABORTED",
        1 => "DROP",
        2 => "PASS",
        3 => "TX",
        4 => "REDIRECT",
        _ => "UNKNOWN",
    }
}

#[derive(Serialize)]
struct JsonReport<'a> {
    engine: &'a str,
    retval: u32,
    action: &'static str,
    data_out: String,
    duration_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    maps: Option<&'a MapState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ringbufs: Option<&'a Ringbufs>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    trace_log: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    notes: &'a [String],
}

pub fn json(engine: &str, outcome: &RunOutcome) -> anyhow::Result<String> {
    let report = JsonReport {
        engine,
        retval: outcome.retval,
        action: action_name(outcome.retval),
        data_out: to_hex(&outcome.data_out),
        duration_ns: outcome.duration_ns,
        maps: outcome.maps.as_ref(),
        ringbufs: outcome.ringbufs.as_ref(),
        trace_log: &outcome.trace_log,
        notes: &outcome.notes,
    };
    Ok(serde_json::to_string(&report)?)
}

pub fn text(engine: &str, input: &[u8], repeat: u32, outcome: &RunOutcome) -> String {
    let mut out = format!(
        "action:      {} (retval {})\n",
        action_name(outcome.retval),
        outcome.retval
    );
    out += &format!(
        "duration:    {} ns per run ({} run{}, engine {engine})\n",
        outcome.duration_ns,
        repeat.max(1),
        if repeat > 1 { "s" } else { "" }
    );
    let change = if outcome.data_out == input {
        "unchanged".to_string()
    } else if outcome.data_out.len() == input.len() {
        "modified".to_string()
    } else {
        format!("modified, input was {} bytes", input.len())
    };
    out += &format!("data_out:    {} bytes ({change})\n", outcome.data_out.len());
    out += &hex_dump(&outcome.data_out);
    for line in &outcome.trace_log {
        out += &format!("trace:       {line}\n");
    }
    for note in &outcome.notes {
        out += &format!("note:        {note}\n");
    }
    if let Some(maps) = &outcome.maps {
        out += "maps:\n";
        out += &state_one_entry_per_line(maps);
    }
    out
}

/// STATE.json with one entry per line: readable for a person, and still a
/// valid state file to feed back with `--maps`.
pub fn state_one_entry_per_line(maps: &MapState) -> String {
    let mut out = String::from("{\n");
    for (m, (name, entries)) in maps.iter().enumerate() {
        let name = serde_json::to_string(name).unwrap_or_default();
        out += &format!("  {name}: [");
        for (i, entry) in entries.iter().enumerate() {
            out += if i == 0 { "\n    " } else { ",\n    " };
            out += &serde_json::to_string(entry).unwrap_or_default();
        }
        out += if entries.is_empty() { "]" } else { "\n  ]" };
        out += if m + 1 < maps.len() { ",\n" } else { "\n" };
    }
    out += "}\n";
    out
}

/// Offset, then 16 bytes per line in two groups of eight.
pub fn hex_dump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (line, chunk) in bytes.chunks(16).enumerate() {
        out += &format!("  {:04x}:", line * 16);
        for (i, b) in chunk.iter().enumerate() {
            out += if i == 8 { "  " } else { " " };
            out += &format!("{b:02x}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_layout() {
        let bytes: Vec<u8> = (0..18).collect();
        assert_eq!(
            hex_dump(&bytes),
            "  0000: 00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f\n  0010: 10 11\n"
        );
    }

    #[test]
    fn text_state_is_valid_state_json() {
        let state: MapState = serde_json::from_str(
            r#"{"a": [{"key": "00", "value": "01"}, {"key": "01", "values": ["02", "03"]}],
                "b": []}"#,
        )
        .unwrap();
        let text = state_one_entry_per_line(&state);
        assert_eq!(serde_json::from_str::<MapState>(&text).unwrap(), state);
        assert_eq!(text.lines().count(), 7, "{text}");
    }

    #[test]
    fn action_names() {
        assert_eq!(action_name(3), "TX");
        assert_eq!(action_name(7), "UNKNOWN");
    }
}
