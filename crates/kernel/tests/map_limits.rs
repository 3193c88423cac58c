//! Map creation at the edges of the kernel's size limits: bpfjet's maps
//! must accept and refuse exactly what the running kernel does, with the
//! same errno (programs from elsewhere declare 5 MB array values, 600-byte
//! hash keys, values just under 4 MiB).

#[allow(dead_code)]
mod common;

use bpfjet_maps::spec::flags as mf;
use bpfjet_maps::{Map, MapOptions, MapSpec, MapType};

fn spec(t: MapType, k: u32, v: u32, n: u32, flags: u32) -> MapSpec {
    let mut s = MapSpec::new("limits", t, k, v, n);
    s.flags = flags;
    s
}

#[test]
fn size_limits_are_the_kernels() {
    require_kernel!("size_limits_are_the_kernels");
    use MapType::*;
    let np = mf::NO_PREALLOC;
    // Kernel 6.18's limits, around each edge: array values up to INT_MAX,
    // hash key + value + 48 under 4 MiB (no limit on the key alone), LPM
    // values up to 4 MiB - 280, queue values up to 4 MiB, per-CPU values up
    // to 32 KiB.
    let rows: &[(MapType, u32, u32, u32, u32)] = &[
        (Array, 4, 5_619_752, 1, 0),
        (Array, 4, i32::MAX as u32, 1, 0),
        (Array, 4, i32::MAX as u32 + 1, 1, 0),
        (PercpuArray, 4, 32768, 1, 0),
        (PercpuArray, 4, 32769, 1, 0),
        (Hash, 600, 8, 16, 0),
        (Hash, 4, 4_194_251, 1, 0),
        (Hash, 4, 4_194_252, 1, 0),
        (Hash, 64, 4_194_191, 1, np),
        (Hash, 64, 4_194_192, 1, np),
        (LruHash, 4, 4_194_251, 1, 0),
        (LruHash, 4, 4_194_252, 1, 0),
        (PercpuHash, 600, 8, 16, 0),
        (LpmTrie, 8, 4_194_024, 1, np),
        (LpmTrie, 8, 4_194_025, 1, np),
        (Queue, 0, 4_194_304, 1, 0),
        (Queue, 0, 4_194_305, 1, 0),
    ];
    let mut differ = Vec::new();
    for &(t, k, v, n, fl) in rows {
        let s = spec(t, k, v, n, fl);
        let kernel = bpfjet_kernel::raw_load::create_map(&s).map_or_else(|e| e.raw(), |_| 0);
        let ours =
            Map::create_anonymous(&s, &MapOptions::with_cpus(2)).map_or_else(|e| e.errno(), |_| 0);
        println!("{t} key={k} value={v} max={n} flags={fl:#x}: kernel {kernel}, bpfjet {ours}");
        if kernel != ours {
            differ.push(format!(
                "{t} key={k} value={v}: kernel errno {kernel}, bpfjet {ours}"
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
