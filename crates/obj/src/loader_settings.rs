//! What a libbpf application changes in an object between open and load,
//! for tools that load an object without its user-space half (`bpfjet
//! trace`): a global variable's initial value (a skeleton's
//! `obj->rodata->NAME = VALUE`), a program left out
//! (`bpf_program__set_autoload(prog, false)`), and the target of a probe
//! whose section names none (`bpf_program__attach_uprobe(prog, retprobe,
//! pid, PATH, offset)` after a bare `SEC("uprobe")`).

use crate::btf::{Btf, BtfType};
use crate::{Object, ProgKind, SlotTarget};

/// BTF `INT` encoding bits.
const INT_SIGNED: u32 = 1;
const INT_BOOL: u32 = 4;

impl Object {
    /// Sets global variable `name` (in `.rodata*`, `.data*` or `.bss*`) to
    /// `value` before the maps are created, as a skeleton's write to
    /// `obj->rodata->NAME` before load. Integers take decimal or `0x` hex
    /// (negative for signed types), `bool`s `true`/`false` too, enums an
    /// enumerator's name, `char` arrays a string (NUL-padded; it must leave
    /// room for the NUL). `name` may go on into the variable: `conf.mode`,
    /// `conf.ports[2]`, for a loader's struct configuration.
    pub fn set_global(&mut self, path: &str, value: &str) -> Result<(), String> {
        let name = path.split(['.', '[']).next().unwrap_or(path);
        let inner = &path[name.len()..];
        let btf = self
            .btf
            .as_ref()
            .ok_or("the object has no BTF: its global variables have no names")?;
        let found = global_vars(self, btf, name);
        let (index, offset, size, target) = match found.as_slice() {
            [one] => *one,
            [] => {
                return Err(format!(
                    "the object has no global variable {name:?} (its globals: {})",
                    global_names(self, btf).join(", ")
                ))
            }
            _ => {
                return Err(format!(
                    "global variable {name:?} is in more than one section"
                ))
            }
        };
        let (at, target, size) = descend(btf, target, size, inner)
            .map_err(|why| format!("global variable {path:?}: {why}"))?;
        let offset = offset + at;
        let bytes = encode(btf, target, size, value)
            .map_err(|why| format!("global variable {path:?}: {why}"))?;
        let map = &mut self.maps[index];
        let image = map
            .initial_data
            .get_or_insert_with(|| vec![0; map.value_size as usize]);
        let range = offset as usize..offset as usize + bytes.len();
        image
            .get_mut(range)
            .ok_or_else(|| format!("global variable {name:?} lies outside its section"))?
            .copy_from_slice(&bytes);
        Ok(())
    }

    /// Whether the variable `path` starts with is one of the object's
    /// globals (of the objects of a deployment, the one `--global` sets).
    pub fn has_global(&self, path: &str) -> bool {
        let name = path.split(['.', '[']).next().unwrap_or(path);
        self.btf
            .as_ref()
            .is_some_and(|btf| !global_vars(self, btf, name).is_empty())
    }

    /// Leaves program `name` out of the load, as
    /// `bpf_program__set_autoload(prog, false)`: it is neither verified nor
    /// attached; the maps stay. Refused when the object puts it into a
    /// PROG_ARRAY slot itself (libbpf cannot initialise that slot either).
    pub fn disable_program(&mut self, name: &str) -> Result<(), String> {
        let at = self
            .programs
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| no_program(self, name))?;
        if self
            .map_inits
            .iter()
            .any(|i| i.target == SlotTarget::Program(name.to_string()))
        {
            return Err(format!(
                "program {name:?} fills a PROG_ARRAY slot the object initialises: it must be loaded"
            ));
        }
        self.programs.remove(at);
        Ok(())
    }

    /// Attaches program `name` at `target` instead of what its section
    /// says, as a loader attaching a bare `SEC("uprobe")` program does.
    /// `target` is `PATH:SYMBOL[+OFF]` (for `usdt` `PATH:PROVIDER:NAME`),
    /// attached the way the section says (`uprobe`, `uretprobe`,
    /// `uprobe.multi`, `usdt`, ...); or `FORM/PATH:SYMBOL` with FORM one of
    /// those, which also serves kprobe-section programs that a tool
    /// attaches as uprobes (the same program type, as libbpf allows); or,
    /// for kprobe-type programs, `FORM/FUNCTION` with FORM `kprobe`,
    /// `kretprobe`, `ksyscall` or `kretsyscall` (a bare `FUNCTION` takes
    /// the section's own kernel form), as a loader's
    /// `bpf_program__attach_kprobe` / `_attach_ksyscall`.
    pub fn set_attach_target(&mut self, name: &str, target: &str) -> Result<(), String> {
        let no = no_program(self, name);
        let p = self
            .programs
            .iter_mut()
            .find(|p| p.name == name)
            .ok_or(no)?;
        if !matches!(p.kind, ProgKind::Probe(_)) {
            return Err(format!(
                "program {name:?} (section {:?}) is not a kprobe, uprobe or usdt program",
                p.section
            ));
        }
        let own = p.section.split('/').next().unwrap_or_default();
        let kprobe_type = KERNEL_FORMS.contains(&own) || USER_FORMS.contains(&own);
        let section = match target.split_once('/') {
            Some((form, _)) if USER_FORMS.contains(&form) => target.to_string(),
            Some((form, _)) if kprobe_type && KERNEL_FORMS.contains(&form) => target.to_string(),
            _ if USER_FORMS.contains(&own) => format!("{own}/{target}"),
            // A kernel function's name has no `PATH:`.
            _ if KERNEL_FORMS.contains(&own) && !target.contains(':') => {
                format!("{own}/{target}")
            }
            _ => {
                return Err(format!(
                    "program {name:?} is a {own} program: say how to attach it in a process, \
                     uprobe/{target} or uretprobe/{target} (or, on a system call's entry, \
                     ksyscall/NAME, kretsyscall/NAME, kprobe/__x64_sys_NAME, \
                     kretprobe/__x64_sys_NAME)"
                ))
            }
        };
        let kind = ProgKind::from_section(&section);
        if !matches!(kind, ProgKind::Probe(_)) {
            return Err(format!("{section:?} is no probe section libbpf knows"));
        }
        p.section = section;
        p.kind = kind;
        Ok(())
    }
}

/// Section forms of kernel probes (kprobe-type programs).
const KERNEL_FORMS: [&str; 4] = ["kprobe", "kretprobe", "ksyscall", "kretsyscall"];

/// Section forms of probes in a process.
const USER_FORMS: [&str; 5] = [
    "uprobe",
    "uretprobe",
    "uprobe.multi",
    "uretprobe.multi",
    "usdt",
];

impl Object {
    /// Sets map `name`'s value size before it is created, as a loader's
    /// `bpf_map__set_value_size` (libbpf-tools size their stack-trace maps
    /// so). Global-data sections keep their size.
    pub fn set_value_size(&mut self, name: &str, size: u32) -> Result<(), String> {
        let map = self
            .maps
            .iter_mut()
            .find(|m| m.name == name)
            .ok_or_else(|| format!("the object has no map {name:?}"))?;
        if map.initial_data.is_some() {
            return Err(format!(
                "map {name:?} holds global variables: its size is theirs"
            ));
        }
        map.value_size = size;
        Ok(())
    }

    /// A copy of program `name` named `copy`, for a second attachment
    /// (programs are attached by name). Returns the copy's name.
    fn copy_program(&mut self, name: &str, copy: &str) -> Result<String, String> {
        if self.program(copy).is_some() {
            return Err(format!("the object already has a program {copy:?}"));
        }
        let mut p = self
            .program(name)
            .ok_or_else(|| no_program(self, name))?
            .clone();
        p.name = copy.to_string();
        self.programs.push(p);
        Ok(copy.to_string())
    }
}

fn no_program(obj: &Object, name: &str) -> String {
    let names: Vec<&str> = obj.programs.iter().map(|p| p.name.as_str()).collect();
    format!(
        "the object has no program {name:?} (its programs: {})",
        names.join(", ")
    )
}

/// Every global variable named `name`: (map index, offset in the
/// section, size, type).
fn global_vars(obj: &Object, btf: &Btf, name: &str) -> Vec<(usize, u32, u32, u32)> {
    let mut found = Vec::new();
    for (index, map) in obj.maps.iter().enumerate() {
        for v in btf.datasec(&map.name).unwrap_or_default() {
            if let Some(BtfType::Var {
                name: var, target, ..
            }) = btf.type_by_id(v.type_id)
            {
                if var == name {
                    found.push((index, v.offset, v.size, *target));
                }
            }
        }
    }
    found
}

fn global_names(obj: &Object, btf: &Btf) -> Vec<String> {
    let mut names = Vec::new();
    for map in &obj.maps {
        for v in btf.datasec(&map.name).unwrap_or_default() {
            if let Some(BtfType::Var { name, .. }) = btf.type_by_id(v.type_id) {
                names.push(name.clone());
            }
        }
    }
    names
}

/// The part of a variable of type `ty` (`size` bytes) that `path` names
/// (`.member` and `[index]` steps, possibly none): its offset in the
/// variable, type and size.
fn descend(btf: &Btf, ty: u32, size: u32, path: &str) -> Result<(u32, u32, u32), String> {
    let (mut at, mut ty, mut size) = (0u32, ty, size);
    let mut rest = path;
    while !rest.is_empty() {
        let id = btf.resolve(ty).ok_or("its type is malformed")?;
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let field = &after[..end];
            let members = match btf.type_by_id(id) {
                Some(BtfType::Struct { members, .. } | BtfType::Union { members, .. }) => members,
                _ => return Err(format!(".{field}: not a struct or union")),
            };
            let m = members.iter().find(|m| m.name == field).ok_or_else(|| {
                let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
                format!("no member {field:?} (members: {})", names.join(", "))
            })?;
            if m.bitfield_size != 0 || m.bit_offset % 8 != 0 {
                return Err(format!(".{field}: a bitfield cannot be set"));
            }
            at += m.bit_offset / 8;
            ty = m.type_id;
            size = btf
                .size_of(ty)
                .and_then(|s| u32::try_from(s).ok())
                .ok_or_else(|| format!(".{field}: its type has no size"))?;
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').ok_or("an index without ']'")?;
            let index: u32 = after[..end]
                .parse()
                .map_err(|_| format!("[{}]: not an index", &after[..end]))?;
            let Some(BtfType::Array { elem, nelems, .. }) = btf.type_by_id(id) else {
                return Err(format!("[{index}]: not an array"));
            };
            if index >= *nelems {
                return Err(format!("[{index}]: the array has {nelems} elements"));
            }
            let elem_size = btf
                .size_of(*elem)
                .and_then(|s| u32::try_from(s).ok())
                .ok_or("its element type has no size")?;
            at += index * elem_size;
            ty = *elem;
            size = elem_size;
            rest = &after[end + 1..];
        } else {
            return Err(format!("{rest:?}: expected .MEMBER or [INDEX]"));
        }
    }
    Ok((at, ty, size))
}

/// `value` as the bytes of a variable of type `ty` (`size` bytes).
fn encode(btf: &Btf, ty: u32, size: u32, value: &str) -> Result<Vec<u8>, String> {
    let id = btf.resolve(ty).ok_or("its type is malformed")?;
    match btf.type_by_id(id) {
        Some(BtfType::Int {
            size: bytes,
            encoding,
            ..
        }) if *bytes == size && matches!(size, 1 | 2 | 4 | 8) => {
            // The INT's data word: encoding in bits 24..27.
            let encoding = (encoding >> 24) & 0xf;
            let v = match value {
                "true" if encoding & INT_BOOL != 0 => 1,
                "false" if encoding & INT_BOOL != 0 => 0,
                _ => parse_int(value)?,
            };
            fit(v, size, encoding & INT_SIGNED != 0)
        }
        Some(BtfType::Enum {
            size: bytes,
            values,
            signed,
            ..
        }) if *bytes == size && matches!(size, 1 | 2 | 4 | 8) => {
            let v = match values.iter().find(|(n, _)| n == value) {
                Some((_, v)) => i128::from(*v),
                None => parse_int(value).map_err(|_| {
                    let names: Vec<&str> = values.iter().map(|(n, _)| n.as_str()).collect();
                    format!(
                        "{value:?} is no number and no enumerator ({})",
                        names.join(", ")
                    )
                })?,
            };
            fit(v, size, *signed || v < 0)
        }
        Some(BtfType::Array { elem, nelems, .. })
            if btf.size_of(*elem) == Some(1) && *nelems == size =>
        {
            let mut out = value.as_bytes().to_vec();
            if out.len() >= size as usize {
                return Err(format!(
                    "{} bytes do not fit a char[{size}] with its NUL",
                    out.len()
                ));
            }
            out.resize(size as usize, 0);
            Ok(out)
        }
        _ => Err(
            "only integers, bools, enums and char arrays can be set from the command line".into(),
        ),
    }
}

fn parse_int(s: &str) -> Result<i128, String> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let magnitude = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => digits.parse::<u64>(),
    }
    .map_err(|_| format!("{s:?} is not an integer"))?;
    let v = i128::from(magnitude);
    Ok(if neg { -v } else { v })
}

/// `v` in `size` little-endian bytes, if the type holds it.
fn fit(v: i128, size: u32, signed: bool) -> Result<Vec<u8>, String> {
    let bits = 8 * size;
    let (lo, hi) = if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    if v < lo || v > hi {
        return Err(format!(
            "{v} does not fit a {}{bits}-bit integer",
            if signed { "signed " } else { "unsigned " }
        ));
    }
    Ok(v.to_le_bytes()[..size as usize].to_vec())
}

/// A loader's changes between open and load, as `bpfjet trace` takes them
/// on its command line (`--global`, `--no-autoload`, `--attach`) and its
/// agent applies them again inside the traced process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoaderSettings {
    /// (variable, value)
    pub globals: Vec<(String, String)>,
    /// Programs left out.
    pub no_autoload: Vec<String>,
    /// (program, target)
    pub attach: Vec<(String, String)>,
    /// (map, value size)
    pub value_size: Vec<(String, u32)>,
}

/// Separates the items of one setting in the agent's environment (no
/// path, value or name contains it).
const ITEM_SEPARATOR: char = '\u{1f}';

impl LoaderSettings {
    /// Applies every change to `obj`; errors name the option.
    pub fn apply(&self, obj: &mut Object) -> Result<(), String> {
        for (name, size) in &self.value_size {
            obj.set_value_size(name, *size)
                .map_err(|e| format!("--value-size {name}={size}: {e}"))?;
        }
        for (name, value) in &self.globals {
            obj.set_global(name, value)
                .map_err(|e| format!("--global {name}={value}: {e}"))?;
        }
        for name in &self.no_autoload {
            obj.disable_program(name)
                .map_err(|e| format!("--no-autoload {name}: {e}"))?;
        }
        // A program given several targets is attached at each, as a loader
        // attaching one program several times: the second and later
        // targets get a copy of it, named PROG__2, PROG__3, ...
        let mut seen: Vec<&str> = Vec::new();
        for (name, target) in &self.attach {
            let copies = seen.iter().filter(|n| **n == name.as_str()).count();
            let attached = if copies == 0 {
                name.clone()
            } else {
                obj.copy_program(name, &format!("{name}__{}", copies + 1))
                    .map_err(|e| format!("--attach {name}={target}: {e}"))?
            };
            obj.set_attach_target(&attached, target)
                .map_err(|e| format!("--attach {name}={target}: {e}"))?;
            seen.push(name);
        }
        Ok(())
    }

    /// The settings as four environment values (globals, programs left
    /// out, attach targets, value sizes), empty when unset.
    pub fn encode(&self) -> [String; 4] {
        let sep = ITEM_SEPARATOR.to_string();
        let pairs = |l: &[(String, String)]| {
            l.iter()
                .map(|(a, b)| format!("{a}={b}"))
                .collect::<Vec<_>>()
                .join(&sep)
        };
        [
            pairs(&self.globals),
            self.no_autoload.join(&sep),
            pairs(&self.attach),
            self.value_size
                .iter()
                .map(|(m, n)| format!("{m}={n}"))
                .collect::<Vec<_>>()
                .join(&sep),
        ]
    }

    /// [`LoaderSettings::encode`]'s inverse.
    pub fn decode(encoded: [&str; 4]) -> LoaderSettings {
        let [globals, no_autoload, attach, value_size] = encoded;
        let items = |s: &str| -> Vec<String> {
            s.split(ITEM_SEPARATOR)
                .filter(|i| !i.is_empty())
                .map(str::to_string)
                .collect()
        };
        let pairs = |s: &str| {
            items(s)
                .into_iter()
                .map(|i| match i.split_once('=') {
                    Some((a, b)) => (a.to_string(), b.to_string()),
                    None => (i, String::new()),
                })
                .collect()
        };
        LoaderSettings {
            globals: pairs(globals),
            no_autoload: items(no_autoload),
            attach: pairs(attach),
            value_size: pairs(value_size)
                .into_iter()
                .map(|(m, n)| (m, n.parse().unwrap_or(0)))
                .collect(),
        }
    }
}
