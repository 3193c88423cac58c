//! `uprobe.multi/PATH:PATTERN`: every function of a file whose name matches
//! a glob, as libbpf resolves a pattern for the kernel's uprobe-multi link.
//!
//! libbpf's rules: `*` matches any run of characters, `?` any one
//! character, everything else itself; the functions (`STT_FUNC`, defined)
//! come from `.symtab`, and only when `.symtab` has no match from
//! `.dynsym` (so a function is not found twice); every match is a probe,
//! aliases included — two names at one address are two probes there, and
//! the kernel runs the program once for each, as bpfjet does.

use crate::symbols::{resolve_path, LoadedObject, ResolvedSymbol};
use crate::ProbeError;
use object::{Object, ObjectSymbol, SymbolFlags};
use std::path::Path;

/// libbpf's glob: `*` any run, `?` any one character.
pub fn glob_match(text: &str, pattern: &str) -> bool {
    let (t, p) = (text.as_bytes(), pattern.as_bytes());
    // Iterative matching with the position of the last `*` to backtrack to.
    let (mut ti, mut pi) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == t[ti]) {
            ti += 1;
            pi += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

const STT_FUNC: u8 = 2;

/// A function of a file matching a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchedFunction {
    pub name: String,
    pub vaddr: u64,
    pub size: u64,
}

/// The functions of the ELF at `path` matching `pattern`, in symbol-table
/// order.
pub fn matching_functions(path: &Path, pattern: &str) -> Result<Vec<MatchedFunction>, ProbeError> {
    let shown = path.display().to_string();
    let data = std::fs::read(path).map_err(|e| ProbeError::Elf {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    let file = object::File::parse(&*data).map_err(|e| ProbeError::Elf {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    let functions = |syms: &mut dyn Iterator<Item = object::Symbol>| -> Vec<MatchedFunction> {
        syms.filter(|s| {
            matches!(s.flags(), SymbolFlags::Elf { st_info, .. } if st_info & 0xf == STT_FUNC)
                && !s.is_undefined()
                && s.address() != 0
        })
        .filter_map(|s| {
            let name = s.name().ok()?;
            glob_match(name, pattern).then(|| MatchedFunction {
                name: name.to_string(),
                vaddr: s.address(),
                size: s.size(),
            })
        })
        .collect()
    };
    let mut found = functions(&mut file.symbols());
    if found.is_empty() {
        found = functions(&mut file.dynamic_symbols());
    }
    if found.is_empty() {
        return Err(ProbeError::SymbolNotFound {
            path: shown,
            symbol: pattern.into(),
            hint: " (no function matches the pattern)",
        });
    }
    Ok(found)
}

/// Every function matching `pattern` in the object `path` (a path or bare
/// library name) loaded in this process, resolved to its address.
pub fn resolve_pattern(
    path: &str,
    pattern: &str,
    objects: &[LoadedObject],
) -> Result<Vec<ResolvedSymbol>, ProbeError> {
    let file = resolve_path(path, objects)?;
    let obj = objects
        .iter()
        .find(|o| o.path == file)
        .ok_or_else(|| ProbeError::NotLoaded {
            path: file.display().to_string(),
        })?;
    resolve_pattern_in(&file, obj.bias, pattern)
}

/// As [`resolve_pattern`], for the file `file` loaded with `bias`.
pub fn resolve_pattern_in(
    file: &Path,
    bias: u64,
    pattern: &str,
) -> Result<Vec<ResolvedSymbol>, ProbeError> {
    Ok(matching_functions(file, pattern)?
        .into_iter()
        .map(|f| ResolvedSymbol {
            path: file.to_path_buf(),
            symbol: f.name,
            offset: 0,
            address: bias.wrapping_add(f.vaddr),
            remaining: f.size,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_as_libbpf() {
        assert!(glob_match("malloc", "malloc"));
        assert!(glob_match("malloc", "*"));
        assert!(glob_match("malloc", "m*"));
        assert!(glob_match("malloc", "*oc"));
        assert!(glob_match("malloc", "m?lloc"));
        assert!(glob_match("malloc", "*a*o*"));
        assert!(glob_match("", "*"));
        assert!(glob_match("aab", "*ab"));
        assert!(!glob_match("malloc", "m?loc"));
        assert!(!glob_match("malloc", "malloc?"));
        assert!(!glob_match("malloc", "calloc"));
        assert!(!glob_match("malloc", ""));
        assert!(!glob_match("mallo", "*oc"));
        assert!(glob_match("str_x", "str_?"));
        assert!(!glob_match("str_xy", "str_?"));
    }

    #[test]
    fn finds_libc_functions_by_pattern() {
        let objs = crate::symbols::loaded_objects();
        let found = resolve_pattern("libc", "getpi?", &objs).unwrap();
        assert!(found.iter().any(|s| s.symbol == "getpid"), "{found:?}");
        assert!(found
            .iter()
            .any(|s| s.address == libc::getpid as *const () as u64));
        let e = resolve_pattern("libc", "no_such_*_fn", &objs).unwrap_err();
        assert!(e.to_string().contains("no function matches"), "{e}");
    }
}
