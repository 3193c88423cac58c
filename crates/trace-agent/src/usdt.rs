//! `usdt/PATH:PROVIDER:NAME` programs: every matching probe of PATH
//! patched (crates/probe `usdt`), the argument specs written where
//! libbpf's usdt.bpf.h reads them.
//!
//! As libbpf: one spec id per distinct (argument string, cookie) — the
//! cookie is 0 for sections, libbpf's auto-attach — kept in
//! `__bpf_usdt_specs[id]`; the probe's address → id in
//! `__bpf_usdt_ip_to_spec_id` (what usdt.bpf.h reads on kernels without
//! BPF cookies); the id as the run's attach cookie (what it reads when
//! `LINUX_HAS_BPF_COOKIE`, which bpfjet's `.kconfig` sets).

use crate::alive;
use crate::attach::regs_view;
use bpfjet_probe::usdt::{self, UsdtAttachment, UsdtSite, UsdtSpec, SPEC_SIZE};
use bpfjet_probe::PtRegs;
use bpfjet_runtime::tracing::{ProbeSite, ProgId, TracingObject};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

pub const SPECS_MAP: &str = "__bpf_usdt_specs";
pub const IP_MAP: &str = "__bpf_usdt_ip_to_spec_id";

/// One probe address and the programs to run there.
pub struct UsdtProbe {
    pub site: UsdtSite,
    pub programs: Vec<ProgId>,
}

/// Spec ids handed out so far (by argument string) and the patches.
struct State {
    spec_ids: HashMap<String, u32>,
    attached: Vec<Attached>,
}

struct Attached {
    name: String,
    file: std::path::PathBuf,
    attachment: UsdtAttachment,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// The object has libbpf's USDT maps with usdt.bpf.h's layout.
pub fn check_maps(object: &TracingObject, section: &str) -> Result<(), String> {
    let loaded = object.loaded();
    let specs = loaded.map(SPECS_MAP).ok_or_else(|| {
        format!(
            "program section {section:?}: the object has no {SPECS_MAP} map \
             (build the program with #include <bpf/usdt.bpf.h>, as libbpf requires)"
        )
    })?;
    if specs.value_size() as usize != SPEC_SIZE || specs.map_type() != bpfjet_maps::MapType::Array {
        return Err(format!(
            "program section {section:?}: {SPECS_MAP} is not an ARRAY of {SPEC_SIZE}-byte \
             struct __bpf_usdt_spec (value size {})",
            specs.value_size()
        ));
    }
    let ips = loaded
        .map(IP_MAP)
        .ok_or_else(|| format!("program section {section:?}: the object has no {IP_MAP} map"))?;
    if ips.key_size() != 8 || ips.value_size() != 4 {
        return Err(format!(
            "program section {section:?}: {IP_MAP} is not a map from long to u32"
        ));
    }
    Ok(())
}

/// Groups the probes of `sites` found for `target` by address into `out`.
pub fn add_sites(out: &mut BTreeMap<u64, UsdtProbe>, sites: Vec<UsdtSite>, program: ProgId) {
    for site in sites {
        out.entry(site.address)
            .or_insert_with(|| UsdtProbe {
                site,
                programs: Vec::new(),
            })
            .programs
            .push(program);
    }
}

/// Writes the specs and patches every probe. On an error the probes
/// patched so far stay (the caller ends the process or reports it).
pub fn attach(
    object: &'static TracingObject,
    probes: BTreeMap<u64, UsdtProbe>,
) -> Result<usize, String> {
    if probes.is_empty() {
        return Ok(0);
    }
    let mut state = STATE.lock().unwrap();
    let state = state.get_or_insert_with(|| State {
        spec_ids: HashMap::new(),
        attached: Vec::new(),
    });
    let loaded = object.loaded();
    let (Some(specs), Some(ips)) = (loaded.map(SPECS_MAP), loaded.map(IP_MAP)) else {
        return Err(format!("the object has no {SPECS_MAP} / {IP_MAP} maps"));
    };
    let mut n = 0;
    for (address, probe) in probes {
        let shown = format!(
            "{}:{}:{}",
            probe.site.path.display(),
            probe.site.note.provider,
            probe.site.note.name
        );
        let next = state.spec_ids.len() as u32;
        let spec_id = *state
            .spec_ids
            .entry(probe.site.note.args.clone())
            .or_insert(next);
        if spec_id == next {
            if spec_id >= specs.max_entries() {
                return Err(format!(
                    "{shown}: more than {} distinct USDT argument specs ({SPECS_MAP}'s \
                     max_entries, BPF_USDT_MAX_SPEC_CNT)",
                    specs.max_entries()
                ));
            }
            let spec = UsdtSpec {
                args: probe.site.args.clone(),
                cookie: 0,
            };
            specs
                .update_elem(&spec_id.to_le_bytes(), &spec.encode(), 0)
                .map_err(|e| format!("{shown}: writing {SPECS_MAP}[{spec_id}]: {e}"))?;
        }
        ips.update_elem(&address.to_le_bytes(), &spec_id.to_le_bytes(), 0)
            .map_err(|e| {
                format!("{shown}: writing {IP_MAP} (BPF_USDT_MAX_IP_CNT too small?): {e}")
            })?;
        let programs = probe.programs;
        let handler: bpfjet_probe::ProbeHandler = Box::new(move |regs: &mut PtRegs| {
            let site = ProbeSite {
                func_ip: address,
                cookie: u64::from(spec_id),
                regs: 0,
                ret_at_sp: false,
            };
            if let Some(armed) = alive::can_run() {
                for &id in &programs {
                    object.run_regs(id, regs_view(regs), &site);
                }
                alive::ran(armed);
            }
        });
        let a = usdt::attach(&probe.site, handler).map_err(|e| format!("{shown}: {e}"))?;
        state.attached.push(Attached {
            name: shown,
            file: probe.site.path.clone(),
            attachment: a,
        });
        n += 1;
    }
    Ok(n)
}

/// Forgets the probes of `file`, which was unloaded (`dlclose`): its code
/// and semaphores are gone. Returns how many.
pub fn forget_file(file: &std::path::Path) -> usize {
    let mut state = STATE.lock().unwrap();
    let Some(state) = state.as_mut() else {
        return 0;
    };
    let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut state.attached)
        .into_iter()
        .partition(|a| a.file == file);
    state.attached = kept;
    let n = gone.len();
    for a in gone {
        a.attachment.forget_unmapped();
    }
    n
}

/// The USDT probes attached, for the report: where, how, hits.
pub fn report() -> serde_json::Value {
    let state = STATE.lock().unwrap();
    let Some(state) = state.as_ref() else {
        return serde_json::Value::Array(Vec::new());
    };
    state
        .attached
        .iter()
        .map(|a| {
            serde_json::json!({
                "probe": a.name,
                "address": format!("{:#x}", a.attachment.address()),
                "patch": if a.attachment.jump_refused.is_some() { "int3" } else { "jump" },
                "why_int3": a.attachment.jump_refused,
                "hits": a.attachment.hits(),
            })
        })
        .collect()
}
