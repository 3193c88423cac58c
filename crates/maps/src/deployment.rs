//! How maps and programs are named when several objects are loaded into one
//! deployment (a root program's object and the objects it tail-calls into),
//! shared by bpfjet's loader and the kernel engine so that their STATE.json
//! dumps use the same names.
//!
//! The first object is the deployment's primary object: its maps and
//! programs keep their own names. Maps pinned by name
//! (`LIBBPF_PIN_BY_NAME`) are one map for the whole deployment and keep
//! their name too. Any other map keeps its name unless another map of the
//! deployment has it (two objects' `.bss`), and then is called
//! `OBJECT:MAP`; programs of the other objects are always `OBJECT:PROGRAM`,
//! so a name says which object a tail-call target comes from.

use std::collections::HashMap;

/// Separates an object's label from a map or program name.
pub const QUALIFIER: char = ':';

/// One map of one object, as the naming rule sees it.
#[derive(Clone, Debug)]
pub struct NamedMap {
    /// The map's own (STATE.json) name in its object.
    pub name: String,
    /// Declared `LIBBPF_PIN_BY_NAME`: shared with every other object that
    /// pins a map of the same name.
    pub pinned: bool,
}

/// `OBJECT:NAME`.
pub fn qualified(label: &str, name: &str) -> String {
    format!("{label}{QUALIFIER}{name}")
}

/// The deployment name of every map, per object (`objects[i]` is the label
/// and the maps of object `i`, the primary object first).
pub fn map_names(objects: &[(&str, Vec<NamedMap>)]) -> Vec<Vec<String>> {
    // How many distinct maps of the deployment claim each plain name: a
    // pinned name counts once however many objects declare it.
    let mut claims: HashMap<&str, usize> = HashMap::new();
    let mut pinned_seen: HashMap<&str, ()> = HashMap::new();
    for (_, maps) in objects {
        for m in maps {
            if m.pinned && pinned_seen.insert(m.name.as_str(), ()).is_some() {
                continue;
            }
            *claims.entry(m.name.as_str()).or_default() += 1;
        }
    }
    objects
        .iter()
        .enumerate()
        .map(|(i, (label, maps))| {
            maps.iter()
                .map(|m| {
                    if i == 0 || m.pinned || claims.get(m.name.as_str()) == Some(&1) {
                        m.name.clone()
                    } else {
                        qualified(label, &m.name)
                    }
                })
                .collect()
        })
        .collect()
}

/// The deployment name of program `name` of object `index`.
pub fn program_name(index: usize, label: &str, name: &str) -> String {
    if index == 0 {
        name.to_string()
    } else {
        qualified(label, name)
    }
}

/// The label a deployment gives the object at `path`: its file stem, as
/// `bpfjet run` names an instance.
pub fn object_label(path: &std::path::Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, pinned: bool) -> NamedMap {
        NamedMap {
            name: name.into(),
            pinned,
        }
    }

    #[test]
    fn primary_and_pinned_keep_names_clashes_are_qualified() {
        let names = map_names(&[
            ("root", vec![m("root_array", true), m(".bss", false)]),
            (
                "lb",
                vec![m("root_array", true), m(".bss", false), m("vips", false)],
            ),
            ("other", vec![m(".bss", false)]),
        ]);
        assert_eq!(names[0], vec!["root_array", ".bss"]);
        assert_eq!(names[1], vec!["root_array", "lb:.bss", "vips"]);
        assert_eq!(names[2], vec!["other:.bss"]);
        assert_eq!(program_name(0, "root", "xdp_root"), "xdp_root");
        assert_eq!(program_name(1, "lb", "balancer"), "lb:balancer");
    }
}
