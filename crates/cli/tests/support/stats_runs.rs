//! Running an XDP object's requests on bpfjet's engines and on the kernel
//! from the same initial map state, keeping only its `stats` map: what the
//! kfunc/loop differential tests (iterators, `may_goto`) compare.

use bpfjet_jit::{JitObject, JitOptions, XdpEngine};
use bpfjet_maps::state::{EntryState, MapState};
use bpfjet_runtime::{ObjectOptions, TestRunOptions};
use std::path::Path;

/// Requests: (program, frame).
pub type Requests<'a> = [(&'a str, Vec<u8>)];

/// A `table` ARRAY of 64 u64 values, `value(i)` at key i.
pub fn table_state(value: impl Fn(u64) -> u64) -> MapState {
    let entries = (0..64u64)
        .map(|i| EntryState {
            key: hex(&(i as u32).to_ne_bytes()),
            value: Some(hex(&value(i).to_ne_bytes())),
            ..EntryState::default()
        })
        .collect();
    MapState::from([("table".to_string(), entries)])
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn stats_only(mut maps: MapState) -> MapState {
    maps.retain(|name, _| name == "stats");
    maps
}

/// The verdicts and the `stats` map of `reqs` on a bpfjet engine.
pub fn on_bpfjet(
    path: &Path,
    initial: &MapState,
    reqs: &Requests,
    engine: XdpEngine,
) -> (Vec<u32>, MapState) {
    let obj = bpfjet_obj::load_file(path).unwrap();
    if engine == XdpEngine::Interp {
        let loaded = bpfjet_runtime::LoadedObject::load(&obj, &ObjectOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        loaded.apply_state(initial).unwrap();
        let v = reqs
            .iter()
            .map(|(p, f)| {
                loaded
                    .test_run(p, f, &TestRunOptions::default())
                    .unwrap()
                    .retval
            })
            .collect();
        return (v, stats_only(loaded.dump_state().unwrap()));
    }
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    jit.loaded().apply_state(initial).unwrap();
    let v = reqs
        .iter()
        .map(|(p, f)| {
            jit.test_run(p, f, &TestRunOptions::default(), engine)
                .unwrap()
                .retval
        })
        .collect();
    (v, stats_only(jit.loaded().dump_state().unwrap()))
}

/// The same on the kernel (`BPF_PROG_TEST_RUN`), or None with the skip
/// reported for `what` when the kernel cannot run it here.
pub fn on_kernel(
    path: &Path,
    initial: &MapState,
    reqs: &Requests,
    what: &str,
) -> Option<(Vec<u32>, MapState)> {
    if let Err(why) = bpfjet_kernel::kernel_available() {
        super::skip(what, &why);
        return None;
    }
    let k = bpfjet_kernel::KernelObject::open_with(path, &bpfjet_kernel::LoadOptions::default())
        .unwrap_or_else(|e| panic!("kernel load of {}: {e}", path.display()));
    k.apply_state(initial).unwrap();
    let v = reqs
        .iter()
        .map(|(p, f)| k.test_run(p, f, 1, Some(0)).unwrap().retval)
        .collect();
    Some((v, stats_only(k.dump_maps().unwrap())))
}
