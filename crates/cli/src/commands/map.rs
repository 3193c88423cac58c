//! `bpfjet map list|dump|lookup|update|delete --instance NAME [MAP [KEY [VALUE]]] [--json]`:
//! the control plane of a running `bpfjet run`, from another process.
//!
//! The instance's maps live in shared memory (`/dev/shm/bpfjet.<NAME>.*`,
//! mode 0600), so every operation here is a memory access on the same map
//! the data plane uses — no syscall per operation once the map is mapped.
//! Keys and values are hex (spaces allowed, as in STATE.json); per-CPU maps
//! show one value per CPU, and an update takes one value (every CPU) or one
//! per CPU. `dump` prints STATE.json.
//!
//! With `--typed`, keys and values are JSON typed by the program's BTF
//! ([`btf_json`]): `lookup`/`delete` take the key as JSON, `update` the key
//! and value, and `lookup`/`dump` print `{"key": ..., "value": ...}` with
//! structs as objects, as `bpftool map dump` does.
//!
//! Exit codes: 0 done; 1 the instance or map does not exist, the key is
//! absent (lookup/delete), or the kernel-style error of the operation
//! (E2BIG, EEXIST, ...); 2 bad command line.

use anyhow::{anyhow, bail, Context, Result};
use bpfjet_maps::state::{parse_hex, to_hex, MapState};
use bpfjet_maps::{Instance, InstanceResolver, Map, MapError, MapInfo};
use std::process::ExitCode;
use std::sync::Arc;

pub mod btf_json;

#[derive(Debug, clap::Args)]
pub struct MapArgs {
    #[command(subcommand)]
    pub op: MapOp,
}

/// Where an operation applies.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// The running instance (`bpfjet run --name`, default the object's file stem).
    #[arg(long)]
    pub instance: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Keys and values as JSON typed by the instance's BTF (structs as
    /// objects, enums by name) instead of hex.
    #[arg(long)]
    pub typed: bool,
}

/// A map's BTF key and value types, for `--typed`.
struct Typed {
    btf: bpfjet_obj::Btf,
    key: u32,
    value: u32,
}

impl Typed {
    fn of(instance: &str, map: &str) -> Result<Typed> {
        let btf = btf_json::load_published(instance)?;
        let (key, value) = btf_json::map_types(&btf, map)
            .with_context(|| format!("--typed needs BTF types for {map}"))?;
        Ok(Typed { btf, key, value })
    }

    fn parse(&self, what: &str, ty: u32, text: &str) -> Result<Vec<u8>> {
        let v: serde_json::Value = serde_json::from_str(text)
            .with_context(|| format!("{what} {text:?} is not JSON (with --typed)"))?;
        btf_json::from_json(&self.btf, ty, &v).with_context(|| format!("{what} {text}"))
    }

    fn key(&self, text: &str) -> Result<Vec<u8>> {
        self.parse("key", self.key, text)
    }

    fn value(&self, text: &str) -> Result<Vec<u8>> {
        self.parse("value", self.value, text)
    }

    /// One entry as `{"key", "value"}` (per-CPU: `"values"`, one per CPU).
    fn entry(&self, key: &[u8], values: &[Vec<u8>], per_cpu: bool) -> Result<serde_json::Value> {
        let k = btf_json::to_json(&self.btf, self.key, key)?;
        let vs = values
            .iter()
            .map(|v| btf_json::to_json(&self.btf, self.value, v))
            .collect::<Result<Vec<_>>>()?;
        Ok(if per_cpu {
            serde_json::json!({"key": k, "values": vs})
        } else {
            serde_json::json!({"key": k, "value": vs.into_iter().next()})
        })
    }
}

/// Prints a typed result: one line with --json, indented otherwise.
fn print_typed(v: &serde_json::Value, json: bool) -> Result<()> {
    if json {
        println!("{v}");
    } else {
        println!("{}", serde_json::to_string_pretty(v)?);
    }
    Ok(())
}

/// `dump --typed`: every entry of the named maps, formatted.
fn dump_typed(inst: &Instance, instance: &str, names: &[String], json: bool) -> Result<()> {
    let mut out = serde_json::Map::new();
    let btf = btf_json::load_published(instance)?;
    for n in names {
        let m = map(inst, n)?;
        let per_cpu = m.map_type().is_per_cpu();
        let entries = m.entries().map_err(|e| anyhow!("dumping {n}: {e}"))?;
        let typed = btf_json::map_types(&btf, n).map(|(key, value)| Typed {
            btf: btf.clone(),
            key,
            value,
        });
        let list = match typed {
            Ok(t) => entries
                .iter()
                .map(|e| t.entry(&e.key, &e.values, per_cpu))
                .collect::<Result<Vec<_>>>()
                .with_context(|| format!("formatting {n}"))?,
            // Dumping one named map insists on types; a whole-instance dump
            // shows the maps BTF does not describe (global data, inner
            // maps) as hex, and says so.
            Err(e) if names.len() > 1 => {
                eprintln!("bpfjet: {n}: {e:#}; shown as hex");
                entries
                    .iter()
                    .map(|e| {
                        let vs: Vec<String> = e.values.iter().map(|v| to_hex(v)).collect();
                        if per_cpu {
                            serde_json::json!({"key": to_hex(&e.key), "values": vs})
                        } else {
                            serde_json::json!({"key": to_hex(&e.key), "value": vs.first()})
                        }
                    })
                    .collect()
            }
            Err(e) => return Err(e.context(format!("--typed needs BTF types for {n}"))),
        };
        out.insert(n.clone(), list.into());
    }
    print_typed(&out.into(), json)
}

#[derive(Debug, clap::Subcommand)]
pub enum MapOp {
    /// The instance's maps: id, name, type, sizes.
    List {
        #[command(flatten)]
        target: Target,
    },
    /// Every entry of one map, or of every map, as STATE.json.
    Dump {
        #[command(flatten)]
        target: Target,
        map: Option<String>,
    },
    /// One entry's value (per CPU for per-CPU maps).
    Lookup {
        #[command(flatten)]
        target: Target,
        map: String,
        /// Key as hex (JSON with --typed).
        key: String,
    },
    /// Create or replace an entry.
    Update {
        #[command(flatten)]
        target: Target,
        map: String,
        /// Key as hex (JSON with --typed).
        key: String,
        /// Value as hex (JSON with --typed); for per-CPU maps one value (every
        /// CPU) or one per CPU.
        #[arg(required = true, num_args = 1..)]
        value: Vec<String>,
        /// any: create or replace; noexist: create only; exist: replace only.
        #[arg(long, default_value = "any", value_parser = ["any", "noexist", "exist"])]
        flags: String,
    },
    /// Remove an entry.
    Delete {
        #[command(flatten)]
        target: Target,
        map: String,
        /// Key as hex (JSON with --typed).
        key: String,
    },
}

/// `BPF_ANY`, `BPF_NOEXIST`, `BPF_EXIST`.
fn update_flags(name: &str) -> u64 {
    match name {
        "noexist" => 1,
        "exist" => 2,
        _ => 0,
    }
}

fn open(instance: &str) -> Result<Instance> {
    Instance::open(instance).map_err(|e| match e {
        MapError::UnknownMap(_) => anyhow!(
            "no running instance '{instance}' (is `bpfjet run` running with --name {instance}? \
             instances live in /dev/shm/bpfjet.{instance}.*)"
        ),
        e => anyhow!("opening instance '{instance}': {e}"),
    })
}

fn map(inst: &Instance, name: &str) -> Result<Arc<Map>> {
    inst.map_by_name(name).map_err(|_| {
        let names: Vec<String> = inst
            .list()
            .into_iter()
            .filter(|m| !m.inner)
            .map(|m| m.name)
            .collect();
        anyhow!(
            "instance '{}' has no map '{name}' (maps: {})",
            inst.name().unwrap_or("?"),
            names.join(", ")
        )
    })
}

fn hex_arg(what: &str, text: &str, size: u32) -> Result<Vec<u8>> {
    let bytes = parse_hex(text).with_context(|| format!("{what} {text:?}"))?;
    if bytes.len() != size as usize {
        bail!(
            "{what} is {} bytes; the map's {what}s are {size} bytes",
            bytes.len()
        );
    }
    Ok(bytes)
}

fn info_json(m: &MapInfo) -> serde_json::Value {
    serde_json::json!({
        "id": m.id,
        "name": m.name,
        "type": m.map_type.name(),
        "key_size": m.key_size,
        "value_size": m.value_size,
        "max_entries": m.max_entries,
        "flags": m.flags,
        "inner": m.inner,
    })
}

pub fn run(args: &MapArgs) -> Result<ExitCode> {
    match &args.op {
        MapOp::List { target } => {
            let inst = open(&target.instance)?;
            let maps = inst.list();
            if target.json {
                let v: Vec<_> = maps.iter().map(info_json).collect();
                println!("{}", serde_json::Value::from(v));
            } else {
                println!(
                    "{:>4}  {:<24} {:<16} {:>5} {:>6} {:>8}",
                    "id", "name", "type", "key", "value", "entries"
                );
                for m in &maps {
                    println!(
                        "{:>4}  {:<24} {:<16} {:>5} {:>6} {:>8}{}",
                        m.id,
                        m.name,
                        m.map_type.name(),
                        m.key_size,
                        m.value_size,
                        m.max_entries,
                        if m.inner { "  (inner)" } else { "" }
                    );
                }
            }
        }
        MapOp::Dump { target, map: name } => {
            let inst = open(&target.instance)?;
            if target.typed {
                let names = match name {
                    Some(n) => vec![n.clone()],
                    None => inst
                        .list()
                        .into_iter()
                        .filter(|m| !m.inner)
                        .map(|m| m.name)
                        .collect(),
                };
                dump_typed(&inst, &target.instance, &names, target.json)?;
                return Ok(ExitCode::SUCCESS);
            }
            let resolver = InstanceResolver {
                instance: &inst,
                progs: &[],
            };
            let state: MapState = match name {
                Some(n) => {
                    let m = map(&inst, n)?;
                    if let Some(stats) = m.ringbuf_stats() {
                        // A ring is a stream: its counters, live.
                        let v = serde_json::json!({
                            n.as_str(): {
                                "produced": stats.produced,
                                "consumed": stats.consumed,
                                "dropped": stats.dropped,
                                "discarded": stats.discarded,
                                "in_flight": stats.in_flight,
                                "backpressure_ms": m.ringbuf_backpressure()
                                    .map(|b| b.stall_limit.as_millis() as u64),
                            }
                        });
                        if target.json {
                            println!("{v}");
                        } else {
                            println!("{}", serde_json::to_string_pretty(&v)?);
                        }
                        return Ok(ExitCode::SUCCESS);
                    }
                    let mut s = MapState::new();
                    s.insert(
                        n.clone(),
                        m.dump(&resolver).map_err(|e| anyhow!("dumping {n}: {e}"))?,
                    );
                    s
                }
                None => inst
                    .dump_state(&resolver)
                    .map_err(|e| anyhow!("dumping: {e}"))?,
            };
            // STATE.json is JSON either way; --json makes it one line.
            if target.json {
                println!("{}", serde_json::to_string(&state)?);
            } else {
                println!("{}", serde_json::to_string_pretty(&state)?);
            }
        }
        MapOp::Lookup {
            target,
            map: name,
            key,
        } => {
            let inst = open(&target.instance)?;
            let m = map(&inst, name)?;
            let typed = target
                .typed
                .then(|| Typed::of(&target.instance, name))
                .transpose()?;
            let key = match &typed {
                Some(t) => t.key(key)?,
                None => hex_arg("key", key, m.key_size())?,
            };
            let per_cpu = m.map_type().is_per_cpu();
            let found = if per_cpu {
                m.lookup_percpu(&key)
            } else {
                m.lookup_copy(&key).map(|v| vec![v])
            };
            let values = match found {
                Ok(v) => v,
                Err(MapError::NotFound) => {
                    if target.json {
                        println!(
                            "{}",
                            serde_json::json!({"key": to_hex(&key), "found": false})
                        );
                    } else {
                        eprintln!("bpfjet: key {} not found in {name}", to_hex(&key));
                    }
                    return Ok(ExitCode::from(1));
                }
                Err(e) => bail!("lookup in {name}: {e}"),
            };
            if let Some(t) = &typed {
                print_typed(&t.entry(&key, &values, per_cpu)?, target.json)?;
                return Ok(ExitCode::SUCCESS);
            }
            let hex: Vec<String> = values.iter().map(|v| to_hex(v)).collect();
            if target.json {
                let mut o = serde_json::json!({"key": to_hex(&key), "found": true});
                if per_cpu {
                    o["values"] = hex.into();
                } else {
                    o["value"] = hex[0].clone().into();
                }
                println!("{o}");
            } else if per_cpu {
                for (cpu, v) in hex.iter().enumerate() {
                    println!("cpu {cpu:>3}: {v}");
                }
            } else {
                println!("{}", hex[0]);
            }
        }
        MapOp::Update {
            target,
            map: name,
            key,
            value,
            flags,
        } => {
            let inst = open(&target.instance)?;
            let m = map(&inst, name)?;
            let (key, values): (Vec<u8>, Vec<Vec<u8>>) = if target.typed {
                let t = Typed::of(&target.instance, name)?;
                (
                    t.key(key)?,
                    value.iter().map(|v| t.value(v)).collect::<Result<_>>()?,
                )
            } else {
                (
                    hex_arg("key", key, m.key_size())?,
                    value
                        .iter()
                        .map(|v| hex_arg("value", v, m.value_size()))
                        .collect::<Result<_>>()?,
                )
            };
            let flags = update_flags(flags);
            let result = if m.map_type().is_per_cpu() && values.len() > 1 {
                if values.len() != m.ncpus() as usize {
                    bail!(
                        "{name} is per-CPU with {} CPUs: give one value (every CPU) or {}",
                        m.ncpus(),
                        m.ncpus()
                    );
                }
                let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
                m.update_percpu(&key, &refs, flags)
            } else if values.len() > 1 {
                bail!("{name} is not per-CPU: give one value");
            } else {
                m.update_elem(&key, &values[0], flags)
            };
            result.map_err(|e| anyhow!("update of {name}: {e}"))?;
            if target.json {
                println!("{}", serde_json::json!({"updated": true}));
            }
        }
        MapOp::Delete {
            target,
            map: name,
            key,
        } => {
            let inst = open(&target.instance)?;
            let m = map(&inst, name)?;
            let key = if target.typed {
                Typed::of(&target.instance, name)?.key(key)?
            } else {
                hex_arg("key", key, m.key_size())?
            };
            match m.delete_elem(&key) {
                Ok(()) => {
                    if target.json {
                        println!("{}", serde_json::json!({"deleted": true}));
                    }
                }
                Err(MapError::NotFound) => {
                    if target.json {
                        println!("{}", serde_json::json!({"deleted": false}));
                    } else {
                        eprintln!("bpfjet: key {} not found in {name}", to_hex(&key));
                    }
                    return Ok(ExitCode::from(1));
                }
                Err(e) => bail!("delete from {name}: {e}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
