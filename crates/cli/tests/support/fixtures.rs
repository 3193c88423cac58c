//! The corpus fixtures, `examples/xdp/fixtures/<program>/cases.json`, as
//! examples/README.md describes them, with every path resolved.

use bpfjet_maps::state::{load_state, parse_hex, MapState};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Deserialize)]
struct CasesFile {
    program: String,
    object: String,
    prog: String,
    cases: Vec<CaseEntry>,
}

#[derive(Deserialize)]
struct CaseEntry {
    name: String,
    packet: String,
    state: String,
    expected_action: String,
    #[serde(default)]
    expected_out: Option<String>,
    #[serde(default)]
    repeat: Option<u32>,
}

/// One corpus program and its cases.
pub struct Fixture {
    /// The fixture directory's name (`katran_lb`).
    pub program: String,
    /// build/examples/xdp/<object>.
    pub object: PathBuf,
    /// The entry program to run.
    pub prog: String,
    pub cases: Vec<Case>,
}

pub struct Case {
    pub name: String,
    pub packet: Vec<u8>,
    /// Resolved state path (`build:` → build/examples/).
    pub state: PathBuf,
    pub expected_action: String,
    pub expected_out: Option<Vec<u8>>,
    /// `BPF_PROG_TEST_RUN` repeat; 1 when the case does not say.
    pub repeat: u32,
}

/// Every fixture, sorted by program name; `build` is build/examples.
pub fn all(build: &Path) -> Vec<Fixture> {
    let dir = super::repo_root().join("examples/xdp/fixtures");
    let mut programs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("cases.json").is_file())
        .collect();
    programs.sort();
    assert!(!programs.is_empty(), "no fixtures under {}", dir.display());
    programs.iter().map(|p| read(p, build)).collect()
}

fn read(dir: &Path, build: &Path) -> Fixture {
    let path = dir.join("cases.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let file: CasesFile =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
    let cases = file
        .cases
        .into_iter()
        .map(|c| Case {
            packet: read_hex_frame(&dir.join(&c.packet)),
            state: match c.state.strip_prefix("build:") {
                Some(generated) => build.join(generated),
                None => dir.join(&c.state),
            },
            expected_out: c.expected_out.map(|f| read_hex_frame(&dir.join(f))),
            expected_action: c.expected_action,
            repeat: c.repeat.unwrap_or(1),
            name: c.name,
        })
        .collect();
    Fixture {
        object: build.join("xdp").join(&file.object),
        program: file.program,
        prog: file.prog,
        cases,
    }
}

/// A `*.pkt.hex` / `*.out.hex` frame: hex bytes, whitespace, `#` comments.
pub fn read_hex_frame(path: &Path) -> Vec<u8> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let digits: String = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ");
    parse_hex(&digits).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// STATE.json files by path, parsed once: the katran state is 12 MB and
/// every katran case uses it.
#[derive(Default)]
pub struct StateCache(Mutex<HashMap<PathBuf, Arc<MapState>>>);

impl StateCache {
    pub fn get(&self, path: &Path) -> Arc<MapState> {
        let mut cache = self.0.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                Arc::new(load_state(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            })
            .clone()
    }
}
