//! Control-plane operation latency: `bpfjet map`'s path (a shared-memory
//! instance opened by name, as a second process does) against the kernel's
//! `bpf(BPF_MAP_UPDATE_ELEM/LOOKUP_ELEM)` on a map of the same shape, in one
//! run, interleaved. The kernel side needs root; without it only bpfjet's
//! figures are printed.
//!
//!   cargo run --release -p bpfjet-io --example ctl_latency

use std::time::Instant;

use bpfjet_maps::{Instance, MapOptions, MapSpec, MapType};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

const KEY: u32 = 40; // the firewall's 5-tuple key
const VALUE: u32 = 8;
const ENTRIES: u32 = 4096;
const OPS: u32 = 200_000;
const ROUNDS: usize = 5;

fn key(i: u32) -> [u8; KEY as usize] {
    let mut k = [0u8; KEY as usize];
    k[..4].copy_from_slice(&(i % ENTRIES).to_ne_bytes());
    k
}

fn time_ns(mut op: impl FnMut(u32)) -> f64 {
    let start = Instant::now();
    for i in 0..OPS {
        op(i);
    }
    start.elapsed().as_nanos() as f64 / f64::from(OPS)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let name = format!("ctl-latency-{}", std::process::id());
    let owner = Instance::create(&name, 2).expect("create instance");
    owner
        .create_map(
            &MapSpec::new("allowlist", MapType::Hash, KEY, VALUE, ENTRIES),
            &MapOptions::with_cpus(2),
        )
        .expect("create map");
    // What `bpfjet map update --instance NAME` does: open by name.
    let control = Instance::open(&name).expect("open instance");
    let ours = control.map_by_name("allowlist").expect("map");
    let kernel = MapHandle::create(
        libbpf_rs::MapType::Hash,
        Some("ctl_latency"),
        KEY,
        VALUE,
        ENTRIES,
        &libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as libbpf_sys::size_t,
            ..Default::default()
        },
    )
    .map_err(|e| eprintln!("kernel map unavailable ({e}); bpfjet figures only"))
    .ok();
    let value = 7u64.to_ne_bytes();
    let (mut ou, mut ol, mut ku, mut kl) = (vec![], vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        ou.push(time_ns(|i| {
            ours.update_elem(&key(i), &value, 0).expect("update")
        }));
        ol.push(time_ns(|i| {
            std::hint::black_box(ours.lookup_copy(&key(i)).expect("lookup"));
        }));
        if let Some(k) = &kernel {
            ku.push(time_ns(|i| {
                k.update(&key(i), &value, MapFlags::ANY)
                    .expect("bpf update")
            }));
            kl.push(time_ns(|i| {
                std::hint::black_box(k.lookup(&key(i), MapFlags::ANY).expect("bpf lookup"));
            }));
        }
    }
    println!("control-plane op latency, hash map {KEY}-byte key, {VALUE}-byte value, median of {ROUNDS} x {OPS} ops");
    println!(
        "  bpfjet shared memory: update {:.0} ns, lookup {:.0} ns",
        median(ou.clone()),
        median(ol.clone())
    );
    if kernel.is_some() {
        let (ku, kl) = (median(ku), median(kl));
        println!("  kernel bpf() syscall: update {ku:.0} ns, lookup {kl:.0} ns");
        println!(
            "  ratio (kernel / bpfjet): update {:.1}x, lookup {:.1}x",
            ku / median(ou),
            kl / median(ol)
        );
    }
}
